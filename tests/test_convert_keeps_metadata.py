"""`bert-keras convert` carries what the source records (task, label names, max_seq_len, casing)
into every layout, and checks every output it writes, the Hugging Face one with transformers too.

Tiny models (2 layers, H=128) over a small vocabulary written here; the fine-tuned folder is
saved the way `bert-keras finetune` saves ``RUN/best``.
"""

import json
import re

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import bert_keras as bk  # noqa: E402
from bert_keras.checkpoints import checkpoint_metadata, load_checkpoint, save_checkpoint  # noqa: E402
from bert_keras.errors import BertKerasError  # noqa: E402
from tests.conftest import reference  # noqa: E402
from tests.test_data_safety import cli  # noqa: E402,F401  (the fixture: `bert-keras ARGS` in process)

WORDS = "the a film movie plot is was good bad great awful fun witty dull mess and but not it".split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + [".", ",", "!", "##s", "##ly"]
LABELS = ["negative", "positive"]
# what `finetune` records for a classification run (bert_keras.finetuning: prepared metadata,
# task, max_seq_len, lower_case)
FINETUNE_METADATA = {"labels": LABELS, "task": "classification", "max_seq_len": 16, "lower_case": True}


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return str(path)


def _classifier(vocab_file, num_classes=2, seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    clf = bk.BertClassifier(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=len(VOCAB))),
                            num_classes=num_classes)
    clf(_ids(), training=False)
    clf.vocab_path = vocab_file
    return clf


def _ids(batch=2, length=8):
    rng = np.random.default_rng(0)
    return {"token_ids": rng.integers(5, len(VOCAB), (batch, length)).astype("int32"),
            "segment_ids": np.zeros((batch, length), "int32"), "padding_mask": np.ones((batch, length), "int32")}


@pytest.fixture(scope="module")
def best(tmp_path_factory, vocab_file):
    """A fine-tuned classifier folder, as `bert-keras finetune` writes RUN/best."""
    folder = tmp_path_factory.mktemp("run") / "best"
    save_checkpoint(_classifier(vocab_file), folder, lower_case=True, metadata=FINETUNE_METADATA)
    return str(folder)


def _predict(cli, folder, text="a good film"):
    proc = cli("predict", "--model", folder, text)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_bert_keras_copy_keeps_labels_max_seq_len_and_casing_and_predict_names_the_label(tmp_path, best, cli):
    proc = cli("convert", "--from", best, "--to", tmp_path / "copy")
    assert proc.returncode == 0, proc.stderr
    assert "kept: labels=['negative', 'positive'], max_seq_len=16, task='classification', lower_case=True" \
        in proc.stdout
    meta = json.loads((tmp_path / "copy" / "bert_keras.json").read_text())
    assert meta["metadata"] == FINETUNE_METADATA
    assert meta["lower_case"] is True
    copied, source = _predict(cli, tmp_path / "copy"), _predict(cli, best)
    assert copied["label"] in LABELS and sorted(copied["probabilities"]) == LABELS
    assert copied == source


def test_hugging_face_output_holds_the_label_names_and_transformers_reads_them(tmp_path, best, cli):
    transformers = reference("transformers")
    out = tmp_path / "hf"
    proc = cli("convert", "--from", best, "--to", out, "--format", "huggingface")
    assert proc.returncode == 0, proc.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    assert config["label2id"] == {"negative": 0, "positive": 1}
    assert config["bert_keras_metadata"] == {"task": "classification", "max_seq_len": 16, "lower_case": True}
    tokenizer = json.loads((out / "tokenizer_config.json").read_text())
    assert tokenizer["do_lower_case"] is True and tokenizer["model_max_length"] == 16
    read = transformers.AutoConfig.from_pretrained(out)
    assert read.id2label == {0: "negative", 1: "positive"} and read.label2id == {"negative": 0, "positive": 1}
    assert read.architectures == ["BertForSequenceClassification"]
    # transformers' own tokenizer class reads the casing and the length written for it
    tok = transformers.BertTokenizer.from_pretrained(out)
    assert tok.do_lower_case is True and tok.model_max_length == 16
    ids = {token: i for i, token in enumerate(VOCAB)}
    assert tok("A GOOD Film")["input_ids"] == [ids["[CLS]"], ids["a"], ids["good"], ids["film"], ids["[SEP]"]]


def test_predict_and_export_on_the_hugging_face_output_answer_with_the_label_names(tmp_path, best, cli):
    out = tmp_path / "hf"
    assert cli("convert", "--from", best, "--to", out, "--format", "huggingface").returncode == 0
    want = _predict(cli, best)
    got = _predict(cli, out)
    assert got["label"] == want["label"] and want["label"] in LABELS
    np.testing.assert_allclose([got["probabilities"][k] for k in LABELS],
                               [want["probabilities"][k] for k in LABELS], atol=1e-6)
    proc = cli("export", "--model-dir", out, "--out", tmp_path / "serving")
    assert proc.returncode == 0, proc.stderr
    assert _predict(cli, tmp_path / "serving")["label"] == want["label"]


def test_hugging_face_round_trip_gets_the_label_names_back(tmp_path, best, cli):
    assert cli("convert", "--from", best, "--to", tmp_path / "hf", "--format", "huggingface").returncode == 0
    proc = cli("convert", "--from", tmp_path / "hf", "--to", tmp_path / "back")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "back" / "bert_keras.json").read_text())
    assert meta["metadata"] == FINETUNE_METADATA
    assert meta["lower_case"] is True
    assert _predict(cli, tmp_path / "back") == _predict(cli, best)


def test_label_names_written_by_transformers_become_labels_and_its_defaults_do_not(tmp_path, vocab_file, cli):
    transformers = reference("transformers")
    torch = reference("torch")
    torch.manual_seed(0)
    common = dict(vocab_size=len(VOCAB), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=128, max_position_embeddings=128)
    named = transformers.BertConfig(**common, id2label={0: "sad", 1: "calm", 2: "glad"},
                                    label2id={"sad": 0, "calm": 1, "glad": 2})
    transformers.BertForSequenceClassification(named).save_pretrained(tmp_path / "named")
    default = transformers.BertConfig(**common, num_labels=3)  # LABEL_0, LABEL_1, LABEL_2
    transformers.BertForSequenceClassification(default).save_pretrained(tmp_path / "default")
    for name in ("named", "default"):
        (tmp_path / name / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    assert checkpoint_metadata(tmp_path / "named") == {"labels": ["sad", "calm", "glad"]}
    assert checkpoint_metadata(tmp_path / "default") == {}
    proc = cli("convert", "--from", tmp_path / "named", "--to", tmp_path / "ours")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "ours" / "bert_keras.json").read_text())
    assert meta["metadata"] == {"labels": ["sad", "calm", "glad"]}
    assert _predict(cli, tmp_path / "ours")["label"] in ("sad", "calm", "glad")


def test_google_layout_keeps_the_metadata_through_a_round_trip(tmp_path, best, cli):
    proc = cli("convert", "--from", best, "--to", tmp_path / "g", "--format", "google")
    assert proc.returncode == 0, proc.stderr
    config = json.loads((tmp_path / "g" / "bert_config.json").read_text())
    assert config["bert_keras_metadata"] == FINETUNE_METADATA and config["do_lower_case"] is True
    assert bk.BertConfig.from_json(tmp_path / "g") == load_checkpoint(best).config
    assert cli("convert", "--from", tmp_path / "g", "--to", tmp_path / "back").returncode == 0
    meta = json.loads((tmp_path / "back" / "bert_keras.json").read_text())
    assert meta["metadata"] == FINETUNE_METADATA and meta["lower_case"] is True


def test_labels_that_do_not_fit_the_head_are_named_as_not_carried(tmp_path, vocab_file, cli):
    save_checkpoint(_classifier(vocab_file), tmp_path / "src", lower_case=True,
                    metadata={"task": "classification", "labels": ["a", "b", "c"], "max_seq_len": 16})
    proc = cli("convert", "--from", tmp_path / "src", "--to", tmp_path / "hf", "--format", "huggingface")
    assert proc.returncode == 0, proc.stderr
    assert "not carried: labels (3 names for a head with 2 classes)" in proc.stdout
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["id2label"] == {"0": "LABEL_0", "1": "LABEL_1"}
    assert config["bert_keras_metadata"] == {"task": "classification", "max_seq_len": 16}
    # an encoder taken out of a classifier has no head for the fine-tuning record to describe
    proc = cli("convert", "--from", tmp_path / "src", "--to", tmp_path / "enc", "--task", "encoder")
    assert proc.returncode == 0, proc.stderr
    assert "not carried: task, labels (the output has no classification head)" in proc.stdout
    assert json.loads((tmp_path / "enc" / "bert_keras.json").read_text())["metadata"] == {"max_seq_len": 16}


def test_hugging_face_output_is_verified_with_transformers(tmp_path, best, cli):
    reference("transformers")
    proc = cli("convert", "--from", best, "--to", tmp_path / "hf", "--format", "huggingface")
    assert proc.returncode == 0, proc.stderr
    assert "verified: max |difference| of outputs after reloading = 0.00e+00" in proc.stdout
    match = re.search(r"verified with transformers BertForSequenceClassification: max \|difference\| of outputs "
                      r"= (\S+) \(largest \|output\| (\S+)\)", proc.stdout)
    assert match, proc.stdout
    assert float(match.group(1)) <= 5e-6 * float(match.group(2))


def test_a_hugging_face_output_that_transformers_reads_differently_is_refused(tmp_path, best, cli, monkeypatch):
    transformers = reference("transformers")
    forward = transformers.BertForSequenceClassification.forward

    def off_by_a_little(self, *args, **kwargs):
        result = forward(self, *args, **kwargs)
        result.logits = result.logits + 1e-3
        return result

    monkeypatch.setattr(transformers.BertForSequenceClassification, "forward", off_by_a_little)
    proc = cli("convert", "--from", best, "--to", tmp_path / "hf", "--format", "huggingface")
    assert proc.returncode == 1
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"bert-keras convert: error: {tmp_path / 'hf'}: transformers' "
                           "BertForSequenceClassification differs from the source by 1.00e-03"), line
    proc = cli("convert", "--from", best, "--to", tmp_path / "unchecked", "--format", "huggingface", "--no-verify")
    assert proc.returncode == 0 and "verified" not in proc.stdout


def test_a_hugging_face_output_that_reloads_differently_is_refused(tmp_path, best, cli, monkeypatch):
    from bert_keras.checkpoints import saving

    write = saving._write_safetensors

    def shifted_bias(path, tensors, metadata=None):
        if "classifier.bias" in tensors:
            tensors = {**tensors, "classifier.bias": tensors["classifier.bias"] + 0.5}
        return write(path, tensors, metadata)

    monkeypatch.setattr(saving, "_write_safetensors", shifted_bias)
    proc = cli("convert", "--from", best, "--to", tmp_path / "hf", "--format", "huggingface")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"bert-keras convert: error: {tmp_path / 'hf'}: converted checkpoint differs from the source by 5.00e-01")


def test_verification_compares_the_metadata_read_back(tmp_path, best):
    from bert_keras.cli.convert import verify

    model = load_checkpoint(best, task="classification")
    save_checkpoint(model, tmp_path / "hf", flavor="huggingface", lower_case=True, metadata=FINETUNE_METADATA)
    with pytest.raises(BertKerasError, match="metadata field 'labels' was written as \\['bad', 'good'\\] but "
                                             "reads back as \\['negative', 'positive'\\]"):
        verify(model, tmp_path / "hf", {**FINETUNE_METADATA, "labels": ["bad", "good"]}, True)
    with pytest.raises(BertKerasError, match="lower_case False was written but casing: uncased"):
        verify(model, tmp_path / "hf", FINETUNE_METADATA, False)
