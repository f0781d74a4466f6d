"""A config's sizes are checked against what its weights file holds and against `bert_keras.config.LIMITS`
before anything is allocated: one line naming the file, the field, its value and what the weights
hold (or the ceiling), within a fraction of a second.

Tiny models (2 layers, H=128) over a 40-token vocabulary; the folders are written with
`save_checkpoint` and then edited the way a typo or a mixed-up download would edit them.
"""

import json
import os
import time

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import bert_keras as bk  # noqa: E402
from bert_keras.checkpoints import load_checkpoint, save_checkpoint  # noqa: E402
from bert_keras.config import LIMITS, MAX_VOCAB_SIZE  # noqa: E402
from bert_keras.errors import BertKerasError, CheckpointError  # noqa: E402

VOCAB_SIZE = 40


def _ids():
    rng = np.random.default_rng(0)
    return {"token_ids": rng.integers(0, VOCAB_SIZE, (2, 8)).astype("int32"),
            "segment_ids": np.zeros((2, 8), "int32"), "padding_mask": np.ones((2, 8), "int32")}


@pytest.fixture(scope="module")
def classifier():
    import keras

    keras.utils.set_random_seed(0)
    clf = bk.BertClassifier(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=VOCAB_SIZE)), num_classes=2)
    clf(_ids())
    return clf


def _edit_json(path, **changes):
    values = json.loads(path.read_text())
    target = values["config"] if path.name == "bert_keras.json" else values
    target.update(changes)
    path.write_text(json.dumps(values))


def _refused(folder, message, task=None, error=CheckpointError):
    start = time.perf_counter()
    with pytest.raises(error) as info:
        load_checkpoint(folder, task=task)
    seconds = time.perf_counter() - start
    assert str(info.value) == message
    assert "\n" not in str(info.value)
    assert seconds < 5, seconds  # measured 0.5 ms (160 ms with the first imports): no tensor is read
    return seconds


def _replace_tensor(path, name, value):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(path)
    tensors[name] = value
    save_file(tensors, path, metadata={"format": "pt"})


def test_bert_keras_folder_with_a_hidden_size_its_weights_do_not_have_is_refused_at_once(tmp_path, classifier):
    save_checkpoint(classifier, tmp_path / "ckpt")
    _edit_json(tmp_path / "ckpt" / "bert_keras.json", hidden_size=1_000_000_000)
    _refused(tmp_path / "ckpt", f"{tmp_path / 'ckpt' / 'bert_keras.json'}: hidden_size 1000000000 does not match "
             "the weights (model.safetensors holds embeddings/token_embedding/embeddings of shape (40, 128), the "
             "config needs (40, 1000000000))")
    _edit_json(tmp_path / "ckpt" / "bert_keras.json", hidden_size=128, num_layers=24)
    _refused(tmp_path / "ckpt", f"{tmp_path / 'ckpt' / 'bert_keras.json'}: num_layers 24 does not match the "
             "weights (model.safetensors holds layers 0 to 1, 2 in all)", task="classification")


def test_hugging_face_folder_with_a_hidden_size_its_weights_do_not_have_is_refused_at_once(tmp_path, classifier):
    save_checkpoint(classifier, tmp_path / "ckpt", flavor="huggingface")
    config = tmp_path / "ckpt" / "config.json"
    _edit_json(config, hidden_size=1_000_000_000)
    _refused(tmp_path / "ckpt", f"{config}: hidden_size 1000000000 does not match the weights (model.safetensors "
             "holds bert.embeddings.word_embeddings.weight of shape (40, 128), the config needs (40, 1000000000))")
    _edit_json(config, hidden_size=128, intermediate_size=3072)
    _refused(tmp_path / "ckpt", f"{config}: intermediate_size 3072 does not match the weights (model.safetensors "
             "holds bert.encoder.layer.0.intermediate.dense.weight of shape (512, 128), the config needs (3072, 128))")
    _edit_json(config, intermediate_size=512, num_hidden_layers=12)
    _refused(tmp_path / "ckpt", f"{config}: num_hidden_layers 12 does not match the weights (model.safetensors "
             "holds layers 0 to 1, 2 in all)")


def test_pytorch_weights_are_checked_from_their_shapes(tmp_path, classifier):
    torch = pytest.importorskip("torch")
    from safetensors.numpy import load_file

    save_checkpoint(classifier, tmp_path / "ckpt", flavor="huggingface")
    st = tmp_path / "ckpt" / "model.safetensors"
    torch.save({k: torch.from_numpy(v) for k, v in load_file(st).items()}, tmp_path / "ckpt" / "pytorch_model.bin")
    os.remove(st)
    config = tmp_path / "ckpt" / "config.json"
    _edit_json(config, max_position_embeddings=4096)
    _refused(tmp_path / "ckpt", f"{config}: max_position_embeddings 4096 does not match the weights "
             "(pytorch_model.bin holds bert.embeddings.position_embeddings.weight of shape (512, 128), the config "
             "needs (4096, 128))")


def test_google_checkpoint_is_checked_from_its_index(tmp_path, classifier):
    save_checkpoint(classifier, tmp_path / "g", flavor="google")
    config = tmp_path / "g" / "bert_config.json"
    _edit_json(config, vocab_size=30522)
    _refused(tmp_path / "g", f"{config}: vocab_size 30522 does not match the weights (bert_model.ckpt holds "
             "bert/embeddings/word_embeddings of shape (40, 128), the config needs (30522, 128))")


def test_a_size_over_its_ceiling_is_refused_even_when_the_weights_hold_it(tmp_path, classifier):
    types = LIMITS["type_vocab_size"] + 1
    rows = np.zeros((types, 128), np.float32)
    save_checkpoint(classifier, tmp_path / "hf", flavor="huggingface")
    _replace_tensor(tmp_path / "hf" / "model.safetensors", "bert.embeddings.token_type_embeddings.weight", rows)
    _edit_json(tmp_path / "hf" / "config.json", type_vocab_size=types)
    _refused(tmp_path / "hf", f"{tmp_path / 'hf' / 'config.json'}: type_vocab_size 1025 is over the ceiling of "
             "1,024 (bert_keras.config.LIMITS)", error=BertKerasError)

    save_checkpoint(classifier, tmp_path / "ours")
    _replace_tensor(tmp_path / "ours" / "model.safetensors", "embeddings/segment_embedding/embeddings", rows)
    meta = json.loads((tmp_path / "ours" / "bert_keras.json").read_text())
    meta["config"]["type_vocab_size"] = types
    meta["files"]["model.safetensors"] = os.path.getsize(tmp_path / "ours" / "model.safetensors")
    (tmp_path / "ours" / "bert_keras.json").write_text(json.dumps(meta))
    _refused(tmp_path / "ours", f"{tmp_path / 'ours' / 'bert_keras.json'}: type_vocab_size 1025 is over the "
             "ceiling of 1,024 (bert_keras.config.LIMITS)", error=BertKerasError)


def test_ceilings_apply_to_configs_without_weights(tmp_path):
    assert bk.BertConfig(vocab_size=MAX_VOCAB_SIZE, hidden_size=8, num_heads=1).vocab_size == 4_194_304
    with pytest.raises(BertKerasError, match=r"^BertConfig.vocab_size 4194305 is over the ceiling of 4,194,304"):
        bk.BertConfig(vocab_size=MAX_VOCAB_SIZE + 1)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 5000,
                                "num_attention_heads": 12}))
    with pytest.raises(BertKerasError) as info:
        bk.BertConfig.from_json(path)
    assert str(info.value) == f"{path}: num_hidden_layers 5000 is over the ceiling of 1,024 (bert_keras.config.LIMITS)"


def test_the_cli_names_the_mismatch_in_one_line(tmp_path, classifier, capsys):
    from bert_keras.cli import main

    save_checkpoint(classifier, tmp_path / "ckpt", flavor="huggingface")
    _edit_json(tmp_path / "ckpt" / "config.json", hidden_size=1_000_000_000)
    capsys.readouterr()
    assert main(["convert", "--from", str(tmp_path / "ckpt"), "--to", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err == (f"bert-keras convert: error: {tmp_path / 'ckpt' / 'config.json'}: hidden_size 1000000000 does "
                   "not match the weights (model.safetensors holds bert.embeddings.word_embeddings.weight of "
                   "shape (40, 128), the config needs (40, 1000000000))\n")
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("flavor", ["bert_keras", "huggingface", "google"])
def test_a_checkpoint_whose_sizes_agree_still_loads_exactly(tmp_path, classifier, flavor):
    save_checkpoint(classifier, tmp_path / flavor, flavor=flavor)
    back = load_checkpoint(tmp_path / flavor, task="classification")
    np.testing.assert_array_equal(np.asarray(back(_ids())), np.asarray(classifier(_ids())))
