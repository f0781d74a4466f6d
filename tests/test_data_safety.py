"""Nothing is lost and nothing stale looks current: every artefact is written whole or not at all.

Tiny models (2 layers, H=128) over a small vocabulary written here; each
check runs a writer against a folder that already holds something (a user's
file, a previous version, a half-written folder) and asserts what is left.
"""

import json
import os
import re
import subprocess

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import bert_keras as bk  # noqa: E402
from bert_keras.checkpoints import checkpoint_metadata, load_checkpoint, save_checkpoint  # noqa: E402
from bert_keras.errors import BertKerasError, CheckpointError  # noqa: E402

WORDS = ("the a film movie plot is was good bad great awful fun witty dull mess jokes fall flat "
         "gorgeous moving deeply and but not it").split()
VOCAB = ["[PAD]"] + [f"[unused{i}]" for i in range(4)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + \
    [".", ",", "!", "'", "##s", "##ly", "##ing"]
SEQ_LEN = 16
TEXTS = ["a good film", "the plot is a mess", "great fun", "awful and dull", "it was witty",
         "jokes fall flat", "deeply moving", "not good"]
LABELS = ["pos", "neg", "pos", "neg", "pos", "neg", "pos", "neg"]


@pytest.fixture
def cli(capsys):
    """`bert-keras ARGS` in process (the dispatcher users run): (exit status, stdout, stderr)."""
    from bert_keras.cli import main

    def run(*args):
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return run


def _one_line_error(proc, *needles):
    assert proc.returncode != 0, proc.stdout + proc.stderr
    # notices (columns used, casing chosen) may come first; the error is one line, the last
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if ": error: " in line]
    assert errors == lines[-1:], proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[-1], lines[-1]
    return lines[-1]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return str(path)


def _classifier(vocab_file, seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=len(VOCAB)))
    clf = bk.BertClassifier(enc, num_classes=2)
    clf(random_ids(), training=False)
    clf.vocab_path = vocab_file
    clf.lower_case = True
    return clf


def random_ids(batch=2, length=8):
    rng = np.random.default_rng(0)
    return {"token_ids": rng.integers(9, len(VOCAB), (batch, length)).astype("int32"),
            "segment_ids": np.zeros((batch, length), "int32"), "padding_mask": np.ones((batch, length), "int32")}


def _save_clf(folder, vocab_file, seed=0, labels=("neg", "pos")):
    clf = _classifier(vocab_file, seed)
    save_checkpoint(clf, folder, metadata={"task": "classification", "labels": list(labels),
                                           "max_seq_len": SEQ_LEN, "lower_case": True})
    return clf


@pytest.fixture(scope="module")
def clf_dir(tmp_path_factory, vocab_file):
    folder = tmp_path_factory.mktemp("clf") / "best"
    _save_clf(folder, vocab_file)
    return str(folder)


def _tree(folder):
    """{relative path: bytes} of every file under folder."""
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = f.read()
    return out


# --------------------------------------------------------------------------- checkpoints
def test_resaving_a_checkpoint_replaces_it_as_a_whole(tmp_path, vocab_file):
    folder = tmp_path / "ckpt"
    _save_clf(folder, vocab_file, seed=0, labels=("neg", "pos"))
    second = _save_clf(folder, vocab_file, seed=1, labels=("bad", "good"))
    back = load_checkpoint(folder, task="classification")
    x = random_ids()
    np.testing.assert_array_equal(np.asarray(back(x)), np.asarray(second(x)))
    meta = json.loads((folder / "bert_keras.json").read_text())
    assert meta["metadata"]["labels"] == ["bad", "good"]
    assert sorted(meta["files"]) == ["model.safetensors", "vocab.txt"]
    assert meta["files"]["vocab.txt"] == os.path.getsize(vocab_file)
    # no temporary sibling is left next to it
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]


def test_save_checkpoint_refuses_a_foreign_folder_and_keeps_it(tmp_path, vocab_file):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "mine.txt").write_text("keep me")
    with pytest.raises(BertKerasError, match="not a bert-keras checkpoint"):
        _save_clf(folder, vocab_file)
    assert _tree(folder) == {"mine.txt": b"keep me"}
    # a checkpoint folder the user added a file to is not replaced either
    ours = tmp_path / "ours"
    _save_clf(ours, vocab_file)
    (ours / "README").write_text("my notes")
    with pytest.raises(BertKerasError, match="README"):
        _save_clf(ours, vocab_file, seed=1)
    assert (ours / "README").read_text() == "my notes"
    # foreign flavors never replace a non-empty folder
    hf = tmp_path / "hf"
    save_checkpoint(_classifier(vocab_file), hf, flavor="huggingface")
    before = _tree(hf)
    with pytest.raises(BertKerasError, match="not empty"):
        save_checkpoint(_classifier(vocab_file, seed=1), hf, flavor="huggingface")
    assert _tree(hf) == before


def test_save_checkpoint_to_a_url_writes_its_marker_last_and_refuses_a_foreign_folder(tmp_path, vocab_file,
                                                                                     monkeypatch):
    import tensorflow as tf

    remote = f"ram://{tmp_path.name}/best"  # TensorFlow's in-memory file system stands in for gs://
    copied, copy = [], tf.io.gfile.copy
    monkeypatch.setattr(tf.io.gfile, "copy", lambda a, b, overwrite=False: copied.append(b) or copy(a, b, overwrite))
    _save_clf(remote, vocab_file, seed=0)
    second = _save_clf(remote, vocab_file, seed=1, labels=("bad", "good"))  # a previous save is replaced
    names = [c.rsplit("/", 1)[-1] for c in copied]
    assert names == ["model.safetensors", "vocab.txt", "bert_keras.json"] * 2, names  # the marker last
    assert sorted(tf.io.gfile.listdir(remote)) == ["bert_keras.json", "model.safetensors", "vocab.txt"]
    # read back from the URL: a local copy in the cache, made again when the URL's files change
    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    x = random_ids()
    np.testing.assert_array_equal(np.asarray(load_checkpoint(remote, task="classification")(x)), np.asarray(second(x)))
    assert checkpoint_metadata(remote)["labels"] == ["bad", "good"]
    # ram:// keeps no modification times, so every open copies; with them, an unchanged folder is not
    copied.clear()
    stat = tf.io.gfile.stat
    monkeypatch.setattr(tf.io.gfile, "stat", lambda p: type("Stat", (), {"length": stat(p).length, "mtime_nsec": 7}))
    for _ in range(2):
        checkpoint_metadata(remote)
    assert len(copied) == 3, copied  # copied once
    third = _save_clf(remote, vocab_file, seed=3, labels=("x", "y"))  # bert_keras.json's size changes
    np.testing.assert_array_equal(np.asarray(load_checkpoint(remote, task="classification")(x)), np.asarray(third(x)))
    assert checkpoint_metadata(remote)["labels"] == ["x", "y"]
    monkeypatch.setattr(tf.io.gfile, "stat", stat)
    bk.save_checkpoint(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=len(VOCAB))), f"ram://{tmp_path.name}/google",
                       vocab_path=vocab_file, flavor="google")
    google = load_checkpoint(f"ram://{tmp_path.name}/google/bert_model.ckpt")  # a Google prefix at a URL
    assert google.config.vocab_size == len(VOCAB)
    # a remote folder that is not a bert-keras save is refused and kept; so is one with a file added
    foreign = f"ram://{tmp_path.name}/notes"
    tf.io.gfile.makedirs(foreign)
    with tf.io.gfile.GFile(foreign + "/mine.txt", "w") as f:
        f.write("keep me")
    with pytest.raises(BertKerasError, match="not a bert-keras checkpoint"):
        _save_clf(foreign, vocab_file)
    with tf.io.gfile.GFile(remote + "/README", "w") as f:
        f.write("my notes")
    with pytest.raises(BertKerasError, match="README"):
        _save_clf(remote, vocab_file, seed=2)
    assert tf.io.gfile.listdir(foreign) == ["mine.txt"] and "README" in tf.io.gfile.listdir(remote)
    assert sorted(os.listdir(tmp_path)) == ["cache"]  # nothing local but the cache's copy


def test_an_interrupted_save_leaves_the_previous_checkpoint(tmp_path, vocab_file, monkeypatch):
    from bert_keras.checkpoints import saving

    folder = tmp_path / "ckpt"
    first = _save_clf(folder, vocab_file, seed=0)
    before = _tree(folder)

    def die(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(saving, "write_json", die)  # after the weights, before the marker
    with pytest.raises(KeyboardInterrupt):
        _save_clf(folder, vocab_file, seed=1, labels=("bad", "good"))
    assert _tree(folder) == before
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    x = random_ids()
    np.testing.assert_array_equal(np.asarray(load_checkpoint(folder, task="classification")(x)),
                                  np.asarray(first(x)))


@pytest.mark.parametrize("damage", ["no_marker", "missing_vocab", "short_weights"])
def test_a_checkpoint_without_its_completion_marker_is_refused_in_one_line(tmp_path, vocab_file, damage, cli):
    folder = tmp_path / "ckpt"
    _save_clf(folder, vocab_file)
    meta_path = folder / "bert_keras.json"
    if damage == "no_marker":  # what an interrupted save of earlier versions left
        meta = json.loads(meta_path.read_text())
        del meta["files"]
        meta_path.write_text(json.dumps(meta))
        needle = "no 'files' record"
    elif damage == "missing_vocab":
        (folder / "vocab.txt").unlink()
        needle = "vocab.txt is missing"
    else:
        with open(folder / "model.safetensors", "r+b") as f:
            f.truncate(1000)
        needle = "model.safetensors has 1000 bytes"
    with pytest.raises(CheckpointError, match=needle):
        load_checkpoint(folder, task="classification")
    proc = cli("export", "--model-dir", folder, "--out", tmp_path / "export")
    _one_line_error(proc, "incomplete bert-keras checkpoint", needle)
    assert not (tmp_path / "export").exists()


# --------------------------------------------------------------------------- exports
def test_export_to_the_working_folder_keeps_the_users_files(tmp_path, clf_dir, cli, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("my notes")
    monkeypatch.chdir(work)
    line = _one_line_error(cli("export", "--model-dir", clf_dir, "--out", "."), "not a bert-keras export")
    assert line.startswith("bert-keras export: error: .:"), line
    assert _tree(work) == {"notes.txt": b"my notes"}
    line = _one_line_error(cli("export", "--model-dir", clf_dir, "--out", ".", "--format", "tflite"),
                           "not a bert-keras export")
    assert _tree(work) == {"notes.txt": b"my notes"}
    # an empty working folder is not swapped away from under the shell either
    (work / "notes.txt").unlink()
    _one_line_error(cli("export", "--model-dir", clf_dir, "--out", "."), "working directory")
    assert os.path.samefile(os.getcwd(), work) and os.listdir(work) == []


def test_export_refuses_an_out_folder_that_contains_the_model(tmp_path, vocab_file, cli):
    run = tmp_path / "RUN"
    _save_clf(run / "best", vocab_file)
    before = _tree(run)
    for out in (run, run / "best"):
        for fmt in ("saved_model", "tflite"):
            _one_line_error(cli("export", "--model-dir", run / "best", "--out", out, "--format", fmt),
                            f"{out}: the export folder is (or contains) the model folder")
            assert _tree(run) == before
    load_checkpoint(run / "best", task="classification")


def test_reexport_replaces_a_previous_saved_model_as_a_whole(tmp_path, clf_dir, vocab_file, cli):
    out = tmp_path / "serving" / "sentiment" / "1"
    proc = cli("export", "--model-dir", clf_dir, "--out", out)
    assert proc.returncode == 0, proc.stderr
    spec = json.loads((out / "assets.extra" / "bert_keras_export.json").read_text())
    assert spec["labels"] == ["neg", "pos"]
    assert (out / "saved_model.pb").exists() and not (out / "ids_only").exists()  # one folder, core ops
    other = tmp_path / "other"
    _save_clf(other, vocab_file, seed=3, labels=("bad", "good"))
    proc = cli("export", "--model-dir", other, "--out", out, "--no-ids-only-copy")
    assert proc.returncode == 0, proc.stderr
    spec = json.loads((out / "assets.extra" / "bert_keras_export.json").read_text())
    assert spec["labels"] == ["bad", "good"]
    # TF Serving's base folder holds only the version folder: no temporary sibling left
    assert os.listdir(out.parent) == ["1"]
    # a file the user put into the export is never deleted by a re-export
    (out / "README").write_text("deployed 2026-12-01")
    _one_line_error(cli("export", "--model-dir", other, "--out", out), "'README'")
    assert (out / "README").read_text() == "deployed 2026-12-01"


def test_tflite_reexport_keeps_other_quantisations_and_writes_whole(tmp_path, clf_dir):
    from bert_keras.export import export_tflite

    out = tmp_path / "tfl"
    f32 = export_tflite(clf_dir, out, text_model=False)
    f16 = export_tflite(clf_dir, out, quantize="float16", text_model=False)
    assert f32["ids"] == str(out / "model.tflite") and f16["ids"] == str(out / "model_float16.tflite")
    assert sorted(os.listdir(out)) == ["bert_keras_export.json", "model.tflite", "model_float16.tflite",
                                       "vocab.txt"]
    assert (out / "vocab.txt").read_text() == "\n".join(VOCAB) + "\n"
    assert os.listdir(tmp_path) == ["tfl"]
    mode = os.stat(out / "model.tflite").st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # not mkstemp's 0600
    # other settings: the previous variants would be misdescribed, so they go (with a warning)
    with pytest.warns(UserWarning, match="model_float16.tflite"):
        export_tflite(clf_dir, out, max_seq_len=12, text_model=False)
    assert sorted(os.listdir(out)) == ["bert_keras_export.json", "model.tflite", "vocab.txt"]
    assert json.loads((out / "bert_keras_export.json").read_text())["max_seq_len"] == 12
    # a TFLite export is not replaced by a SavedModel
    from bert_keras.export import export_saved_model

    with pytest.raises(BertKerasError, match="holds a bert-keras TFLite export"):
        export_saved_model(clf_dir, out)
    assert sorted(os.listdir(out)) == ["bert_keras_export.json", "model.tflite", "vocab.txt"]


# --------------------------------------------------------------------------- fine-tuning
def _examples():
    from bert_keras.tasks import InputExample

    return [InputExample(text_a=t, label=y, guid=str(i)) for i, (t, y) in enumerate(zip(TEXTS, LABELS))]


class _DieAfterOneBatch:
    def __new__(cls):
        import keras

        class Die(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                raise KeyboardInterrupt

        return Die()


def test_finetune_never_leaves_a_previous_runs_results_looking_current(tmp_path, clf_dir, vocab_file, cli):
    from bert_keras import finetuning

    run = tmp_path / "run"
    kwargs = dict(epochs=1, batch_size=4, max_seq_len=SEQ_LEN, verbose=0)
    # a previous run's outputs
    _save_clf(run / "best", vocab_file, seed=5)
    (run / "eval_results.json").write_text('{"accuracy": 99.0}\n')
    (run / "history.json").write_text("[]\n")
    (run / "train.csv").write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in zip(TEXTS, LABELS)))
    previous = _tree(run)
    assert {"best/bert_keras.json", "eval_results.json", "history.json", "train.csv"} <= set(previous)
    # without --overwrite a non-empty model dir is refused, before any work, and left as it was
    with pytest.raises(BertKerasError, match="not empty"):
        finetuning.finetune("classification", _examples(), _examples(), clf_dir, run, **kwargs)
    line = _one_line_error(cli("finetune", "--task", "classification", "--init", clf_dir, "--train",
                               run / "train.csv", "--model-dir", run, "--epochs", 1), "--overwrite")
    assert line.startswith(f"bert-keras finetune: error: {run}: folder is not empty"), line
    assert _tree(run) == previous
    # with it, a run that dies in its first batch leaves no best/ nor results of the previous run
    with pytest.raises(KeyboardInterrupt):
        finetuning.finetune("classification", _examples(), _examples(), clf_dir, run, overwrite=True,
                            callbacks=[_DieAfterOneBatch()], **kwargs)
    assert sorted(os.listdir(run)) == ["train.csv"]  # the user's file stays
    # and a run that finishes writes them again
    proc = cli("finetune", "--task", "classification", "--init", clf_dir, "--train", run / "train.csv",
               "--eval", run / "train.csv", "--model-dir", run, "--epochs", 1, "--batch-size", 4,
               "--max-seq-len", SEQ_LEN, "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(run)) == ["best", "eval_results.json", "history.json", "train.csv"]
    load_checkpoint(run / "best", task="classification")


def test_finetune_overwrite_never_deletes_its_own_init_or_a_foreign_best(tmp_path, clf_dir, vocab_file):
    import shutil

    from bert_keras import finetuning

    run = tmp_path / "run"
    _save_clf(run / "best", vocab_file)
    before = _tree(run)
    with pytest.raises(BertKerasError, match="initial checkpoint"):
        finetuning.finetune("classification", _examples(), None, run / "best", run, overwrite=True, epochs=1)
    assert _tree(run) == before
    shutil.rmtree(run / "best")
    (run / "best").mkdir()
    (run / "best" / "mine.txt").write_text("keep")
    with pytest.raises(BertKerasError, match="not a bert-keras checkpoint"):
        finetuning.finetune("classification", _examples(), None, clf_dir, run, overwrite=True, epochs=1)
    assert _tree(run) == {"best/mine.txt": b"keep"}


# --------------------------------------------------------------------------- pre-training's final/
def test_pretraining_completes_a_final_folder_left_without_its_vocab(tmp_path, vocab_file):
    from bert_keras.training.pretrain import PretrainConfig, pretrain

    rng = np.random.default_rng(0)
    docs = ["\n".join(" ".join(rng.choice(WORDS, 6)) for _ in range(8)) for _ in range(4)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(docs) + "\n")
    cfg = dict(preset="tiny", vocab=vocab_file, train_files=str(corpus), model_dir=str(tmp_path / "run"),
               phase1_steps=2, phase2_steps=0, phase1_seq_len=16, phase1_max_predictions=3, batch_size=4,
               warmup_steps=1, log_every=1, checkpoint_every=2, strategy="cpu", progress=False, seed=0)
    pretrain(PretrainConfig.from_dict(cfg))
    final = tmp_path / "run" / "final"
    assert sorted(os.listdir(final)) == ["bert_keras.json", "model.safetensors", "vocab.txt"]
    assert not [n for n in os.listdir(final.parent) if n.startswith(".final")]
    (final / "vocab.txt").unlink()  # what a kill between the files of a non-atomic save left
    with pytest.raises(CheckpointError, match="vocab.txt is missing"):
        load_checkpoint(final)
    pretrain(PretrainConfig.from_dict(cfg))  # the finished run, started again
    assert (final / "vocab.txt").read_text() == "\n".join(VOCAB) + "\n"
    load_checkpoint(final, task="pretraining")


# --------------------------------------------------------------------------- single-file outputs
def test_predict_output_keeps_the_previous_file_when_predicting_fails(tmp_path, clf_dir, cli, monkeypatch):
    from bert_keras.export.predict import Predictor

    out = tmp_path / "predictions.jsonl"
    proc = cli("predict", "--model", clf_dir, "--output", out, "--batch-size", 2, *TEXTS[:3])
    assert proc.returncode == 0, proc.stderr
    first = out.read_text()
    assert [json.loads(line)["label"] in ("neg", "pos") for line in first.splitlines()] == [True] * 3
    original = Predictor.predict

    def fail_after_one(self, texts, texts_b=None, batch_size=32):
        for n, record in enumerate(original(self, texts, texts_b, batch_size)):
            if n == 1:
                raise BertKerasError("the model server went away")
            yield record

    monkeypatch.setattr(Predictor, "predict", fail_after_one)
    _one_line_error(cli("predict", "--model", clf_dir, "--output", out, *TEXTS), "went away")
    assert out.read_text() == first  # not truncated, not half-replaced
    assert os.listdir(tmp_path) == ["predictions.jsonl"]


def test_evaluate_output_is_written_whole_and_never_into_a_folder(tmp_path, clf_dir, cli):
    data = tmp_path / "dev.csv"
    data.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in zip(TEXTS, LABELS)))
    out = tmp_path / "scores" / "dev.json"  # its folder is created
    proc = cli("evaluate", "--model-dir", clf_dir, "--eval", data, "--output", out)
    assert proc.returncode == 0, proc.stderr
    scores = json.loads(out.read_text())
    assert json.loads(proc.stdout) == scores and 0 <= scores["accuracy"] <= 100
    assert sorted(os.listdir(out.parent)) == ["dev.json"]
    # progress as one plain line on stderr (stdout is the JSON), no terminal codes
    assert re.search(rf"^{len(TEXTS)} sequences, [\d,.]+ sequences/s$", proc.stderr, re.M), proc.stderr
    assert "\x1b" not in proc.stderr + proc.stdout and "\r" not in proc.stderr + proc.stdout
    _one_line_error(cli("evaluate", "--model-dir", clf_dir, "--eval", data, "--output", tmp_path),
                    f"{tmp_path}: is a folder")


def test_save_vocab_and_config_json_are_atomic_with_the_usual_permissions(tmp_path, monkeypatch):
    from bert_keras import writing
    from bert_keras.text.vocab import load_vocab, save_vocab

    path = tmp_path / "vocab.txt"
    save_vocab(VOCAB, path)
    assert load_vocab(str(path)) == VOCAB
    umask = os.umask(0o022)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask
    cfg = bk.BertConfig.preset("tiny", vocab_size=len(VOCAB))
    cfg.to_json(tmp_path / "config.json")
    assert bk.BertConfig.from_json(tmp_path / "config.json") == cfg

    def die(fd):
        raise OSError("disk full")

    monkeypatch.setattr(writing.os, "fsync", die)  # fails after the whole text is written, before the rename
    with pytest.raises(OSError):
        save_vocab(["[PAD]", "x"], path)
    assert load_vocab(str(path)) == VOCAB
    assert sorted(os.listdir(tmp_path)) == ["config.json", "vocab.txt"]


def test_convert_to_an_existing_file_or_folder_is_a_one_line_error(tmp_path, clf_dir, cli):
    target = tmp_path / "taken"
    target.write_text("mine")
    line = _one_line_error(cli("convert", "--from", clf_dir, "--to", target), "exists and is a file")
    assert line.startswith(f"bert-keras convert: error: {target}:"), line
    assert target.read_text() == "mine"
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    _one_line_error(cli("convert", "--from", clf_dir, "--to", folder, "--format", "huggingface"),
                    "exists and is not empty")
    assert _tree(folder) == {"config.json": b"{}"}
    proc = cli("convert", "--from", clf_dir, "--to", tmp_path / "new", "--format", "google")
    assert proc.returncode == 0, proc.stderr
    assert "verified" in proc.stdout
