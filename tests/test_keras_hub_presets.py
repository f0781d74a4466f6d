"""keras-hub presets in and out, against keras-hub itself on the real MiniLM weights."""

import json
import os
import sys
import warnings

import numpy as np
import pytest

import bert_keras as bk
from bert_keras.checkpoints import checkpoint_metadata, checkpoint_task, model_variables
from bert_keras.errors import BertKerasError
from conftest import reference

keras_hub = reference("keras_hub")

TEXTS = ["the film is a quiet triumph", "Hello world, again and again.", "a"]


def _batch(vocab_path, lower_case=True, seq_len=16):
    from bert_keras.text import BertTokenizer

    feats = BertTokenizer.from_vocab(vocab_path, lower_case=lower_case)(TEXTS, seq_len=seq_len)
    return {k: np.asarray(feats[k]).astype("int32") for k in ("token_ids", "segment_ids", "padding_mask")}


def _max_diff(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


def _same_weights(a, b):
    va, vb = model_variables(a), model_variables(b)
    assert sorted(va) == sorted(vb)
    return max(_max_diff(va[k].numpy(), vb[k].numpy()) for k in vb)


@pytest.fixture(scope="module")
def keras_hub_presets(minilm_dir, tmp_path_factory):
    """What keras-hub itself writes from the real MiniLM folder: a backbone and a 3-class classifier preset."""
    root = tmp_path_factory.mktemp("keras_hub")
    backbone = keras_hub.models.BertBackbone.from_preset(minilm_dir)
    backbone.save_to_preset(str(root / "backbone"))
    keras_hub.models.BertTokenizer.from_preset(minilm_dir).save_to_preset(str(root / "backbone"))
    clf = keras_hub.models.BertTextClassifier.from_preset(minilm_dir, num_classes=3, preprocessor=None)
    rng = np.random.default_rng(3)  # a head that is not keras-hub's initial one
    clf.get_layer("logits").kernel.assign(rng.normal(0, 0.2, (384, 3)).astype("float32"))
    clf.get_layer("logits").bias.assign(np.array([0.1, -0.2, 0.3], "float32"))
    clf.save_to_preset(str(root / "classifier"))
    return root, backbone, clf


def test_a_keras_hub_backbone_preset_loads_with_the_hugging_face_weights_and_keras_hubs_outputs(
        keras_hub_presets, minilm_dir):
    root, backbone, _ = keras_hub_presets
    enc = bk.load_checkpoint(str(root / "backbone"))
    assert isinstance(enc, bk.BertEncoder) and checkpoint_task(str(root / "backbone")) is None
    # the very same weights as read from the Hugging Face folder: measured 0.0
    assert _same_weights(enc, bk.load_checkpoint(minilm_dir)) == 0.0
    assert enc.config.hidden_act == "gelu_approximate"  # what keras-hub's BertBackbone computes
    assert enc.vocab_path.endswith(os.path.join("assets", "tokenizer", "vocabulary.txt"))
    assert enc.lower_case is True
    x = _batch(enc.vocab_path)
    ours, theirs = enc(x), backbone(x)
    mask = x["padding_mask"][..., None].astype(bool)
    seq = float(np.abs(np.where(mask, np.asarray(ours["sequence_output"]) - np.asarray(theirs["sequence_output"]),
                                0)).max())
    pooled = _max_diff(ours["pooled_output"], theirs["pooled_output"])
    print(f"\nkeras-hub preset: sequence {seq:.2e}, pooled {pooled:.2e} from keras-hub's own BertBackbone")
    assert seq < 2e-5 and pooled < 2e-6  # measured 1.7e-6 and 1.3e-7


def test_a_keras_hub_classifier_preset_loads_with_its_head(keras_hub_presets):
    root, _, clf = keras_hub_presets
    folder = str(root / "classifier")
    assert checkpoint_task(folder) == "classification"
    model = bk.load_checkpoint(folder, task="classification")
    assert model.num_classes == 3
    head = model_variables(model)
    assert _max_diff(head["classifier/bias"].numpy(), [0.1, -0.2, 0.3]) < 1e-7
    x = _batch(os.path.join(str(root / "backbone"), "assets", "tokenizer", "vocabulary.txt"))
    diff = _max_diff(model(x), clf(x))
    assert diff < 1e-6, diff  # measured 2.5e-8


def test_our_classifier_saved_as_a_preset_loads_in_keras_hub_with_tokenizer_labels_and_casing(minilm_dir, tmp_path):
    model = bk.load_checkpoint(minilm_dir, task="classification", num_classes=2)
    rng = np.random.default_rng(0)
    model_variables(model)["classifier/kernel"].assign(rng.normal(0, 0.2, (384, 2)).astype("float32"))
    out = str(tmp_path / "preset")
    with pytest.warns(UserWarning, match="tanh approximation"):
        bk.save_checkpoint(model, out, flavor="keras_hub", metadata={"labels": ["neg", "pos"], "max_seq_len": 32})
    theirs = keras_hub.models.BertTextClassifier.from_preset(out)  # keras-hub's own loader, preprocessor too
    assert theirs.num_classes == 2
    back = bk.load_checkpoint(out, task="classification")
    assert _same_weights(back, model) == 0.0
    assert checkpoint_metadata(out) == {"labels": ["neg", "pos"], "max_seq_len": 32}
    assert back.lower_case is True
    # keras-hub's preprocessor tokenizes as ours does (the vocabulary and casing were carried)
    x = _batch(back.vocab_path)
    pre = theirs.preprocessor(TEXTS)
    n = x["token_ids"].shape[1]
    assert np.array_equal(np.asarray(pre["token_ids"])[:, :n], x["token_ids"])
    assert np.asarray(pre["token_ids"]).shape[1] == 32
    diff = _max_diff(theirs.predict(TEXTS, verbose=0), back(x))
    assert diff < 1e-5, diff  # measured 1.9e-8 on the raw logits; padded to 32 here


def test_writing_the_mlm_heads_as_a_preset_is_refused_with_the_command_that_works(minilm_dir, tmp_path, capsys):
    from bert_keras.cli import main

    code = main(["convert", "--from", minilm_dir, "--to", str(tmp_path / "tc"), "--format", "keras_hub",
                 "--task", "token_classification"])
    err = capsys.readouterr().err
    assert code != 0 and "keras-hub has no BERT token_classification task" in err and "--task encoder" in err
    assert not os.path.exists(tmp_path / "tc")


def test_convert_writes_a_preset_keras_hub_loads_and_checks_it(minilm_dir, tmp_path, capsys):
    from bert_keras.cli import main

    out = tmp_path / "kh"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["convert", "--from", minilm_dir, "--to", str(out), "--format", "keras_hub"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "verified: weights equal; keras-hub's BertBackbone loads it" in printed
    config = json.loads((out / "config.json").read_text())
    assert config["registered_name"] == "keras_hub>BertBackbone" and config["config"]["num_layers"] == 6
    backbone = keras_hub.models.BertBackbone.from_preset(str(out))
    assert backbone.count_params() == 22_713_216


def test_a_keras_hub_preset_missing_a_layer_is_one_line(keras_hub_presets, tmp_path):
    import h5py
    import shutil

    root, _, _ = keras_hub_presets
    broken = tmp_path / "broken"
    shutil.copytree(root / "backbone", broken)
    with h5py.File(broken / "model.weights.h5", "r+") as f:
        for key in list(f["layers"]):
            if f["layers"][key]["vars"].attrs.get("name") == "transformer_layer_2":
                del f["layers"][key]
    with pytest.raises(BertKerasError, match=r"model\.weights\.h5: no layer 'transformer_layer_2'"):
        bk.load_checkpoint(str(broken))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_a_keras_hub_masked_lm_preset_loads_with_its_head(minilm_dir, tmp_path, recwarn):
    mlm = keras_hub.models.BertMaskedLM.from_preset(minilm_dir, preprocessor=None)
    rng = np.random.default_rng(5)  # a head that is not keras-hub's initial one
    for v in mlm.masked_lm_head.weights:
        if "token_embedding" not in v.path:
            v.assign(rng.normal(0, 0.2, v.shape).astype("float32") + (1.0 if "gamma" in v.path else 0.0))
    mlm.save_to_preset(str(tmp_path / "mlm"))
    keras_hub.models.BertTokenizer.from_preset(minilm_dir).save_to_preset(str(tmp_path / "mlm"))
    assert checkpoint_task(str(tmp_path / "mlm")) == "pretraining"
    pre = bk.load_checkpoint(str(tmp_path / "mlm"), task="pretraining")
    assert any("masked-LM head computes exact GELU" in str(w.message) for w in recwarn)
    x = _batch(os.path.join(str(tmp_path / "mlm"), "assets", "tokenizer", "vocabulary.txt"))
    positions = np.array([[1, 2, 3]] * len(x["token_ids"]), "int32")
    ours = np.asarray(pre(dict(x, masked_positions=positions))["mlm_logits"])
    theirs = np.asarray(mlm(dict(x, mask_positions=positions)))
    diff = _max_diff(ours, theirs)
    print(f"\nkeras-hub masked-LM logits: {diff:.2e} from keras-hub's BertMaskedLM (scale {np.abs(theirs).max():.1f})")
    assert diff < 1e-2, diff  # measured 1.1e-3 at logits of 5.8: keras-hub's head computes exact GELU, eps 1e-5
