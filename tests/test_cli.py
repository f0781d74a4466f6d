"""The `bert-keras` command line, run as a user runs it (a subprocess)."""

import json
import os
import shutil
import subprocess
import sys

import pytest


def run_cli(*args, input=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "bert_keras", *map(str, args)], capture_output=True,
                          text=True, input=input, timeout=timeout)


def test_help_lists_the_subcommands():
    proc = run_cli("--help")
    assert proc.returncode == 0
    for name in ("convert", "tokenize"):
        assert name in proc.stdout


def test_convert_hugging_face_to_google_and_back(tmp_path, minilm_dir):
    proc = run_cli("convert", "--from", minilm_dir, "--to", tmp_path / "g", "--format", "google")
    assert proc.returncode == 0, proc.stderr
    assert "verified: max |difference| of outputs after reloading = 0.00e+00" in proc.stdout
    assert (tmp_path / "g" / "bert_model.ckpt.index").exists() and (tmp_path / "g" / "vocab.txt").exists()
    proc = run_cli("convert", "--from", tmp_path / "g", "--to", tmp_path / "hf", "--format", "huggingface")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "hf" / "model.safetensors").exists()


@pytest.mark.parametrize("args,message", [
    (("convert", "--from", "/no/such/folder", "--to", "out"), "checkpoint not found: /no/such/folder"),
])
def test_bad_input_is_one_line_without_traceback(args, message):
    proc = run_cli(*args)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1


# --------------------------------------------------------------------------- help and usage
def _main(capsys, *args, stdin=None, monkeypatch=None):
    """`bert-keras ARGS` in this process: (exit status, stdout, stderr)."""
    import io

    from bert_keras.cli import main

    capsys.readouterr()
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    try:
        code = main([str(a) for a in args])
    except SystemExit as e:  # argparse: --help and usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_every_subcommand_help_has_examples(capsys):
    from bert_keras.cli import SUBCOMMANDS

    assert set(SUBCOMMANDS) == {"demo", "pretrain", "finetune", "evaluate", "export", "convert", "tokenize",
                                "vocab", "pretraining-data", "predict"}
    for name in SUBCOMMANDS:
        code, out, _ = _main(capsys, name, "--help")
        assert code == 0, name
        examples = out.split("examples:", 1)
        assert len(examples) == 2 and f"bert-keras {name} " in examples[1], f"{name} --help has no examples"
    code, out, _ = _main(capsys, "--help")
    assert code == 0 and "examples:" in out and all(name in out for name in SUBCOMMANDS)


def test_help_does_not_import_tensorflow():
    script = ("import sys\nfrom bert_keras.cli import main\n"
              "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
              "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_export_quantize_choices_are_the_exporters():
    from bert_keras.cli.export import QUANTIZE as cli_choices
    from bert_keras.export.tflite import QUANTIZE

    assert cli_choices == QUANTIZE


@pytest.mark.parametrize("args,message", [
    (("finetune", "--task", "sentiment", "--init", "m", "--train", "t.csv", "--model-dir", "o"),
     "argument --task: invalid choice: 'sentiment'"),
    (("export", "--model-dir", "m"), "the following arguments are required: --out"),
    (("pretrain", "--phase1-steps", "many"), "argument --phase1-steps: invalid int value: 'many'"),
    (("frobnicate",), "invalid choice: 'frobnicate'"),
])
def test_usage_errors_are_one_line(args, message):
    proc = run_cli(*args, timeout=120)
    assert proc.returncode == 2
    assert message in proc.stderr and "usage:" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def folders(tmp_path_factory, minilm_dir):
    """A tiny classifier folder with the real uncased vocabulary, and broken inputs next to it."""
    import keras

    import bert_keras as bk

    root = tmp_path_factory.mktemp("cli")
    vocab = os.path.join(minilm_dir, "vocab.txt")
    keras.utils.set_random_seed(0)
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522, max_position_embeddings=64))
    bk.save_checkpoint(bk.BertClassifier(enc, num_classes=2), root / "clf", vocab_path=vocab,
                       metadata={"task": "classification", "labels": ["negative", "positive"], "max_seq_len": 24})
    # A checkpoint whose vocab.txt (30,522 lines) does not fit its 100-row token embedding.
    with open(vocab, encoding="utf-8") as f:
        (root / "v100.txt").write_text("".join(f.readlines()[:100]), encoding="utf-8")
    bk.save_checkpoint(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=100, max_position_embeddings=64)),
                       root / "mismatch", vocab_path=root / "v100.txt")
    shutil.copyfile(vocab, root / "mismatch" / "vocab.txt")
    meta = json.loads((root / "mismatch" / "bert_keras.json").read_text())
    meta["files"]["vocab.txt"] = os.path.getsize(vocab)  # the swap recorded, as if saved so
    (root / "mismatch" / "bert_keras.json").write_text(json.dumps(meta))
    (root / "bad.yaml").write_text("phase1_steps: [10\n")
    (root / "bad.json").write_text('{"phase1_steps": 10,}')
    (root / "unknown_key.json").write_text('{"phase1_steps": 10, "learning_rat": 0.1}')
    (root / "hf").mkdir()
    (root / "hf" / "config.json").write_text("{not json")
    (root / "hf" / "model.safetensors").write_bytes(b"")
    (root / "train.csv").write_text("text,label\nfine,pos\n")
    return root


@pytest.mark.parametrize("args,message", [
    # a checkpoint/vocab mismatch
    (("convert", "--from", "{root}/mismatch", "--to", "{root}/out"),
     "{root}/mismatch/vocab.txt: 30522 tokens but the model's token embedding has 100 rows"),
    (("finetune", "--task", "classification", "--init", "{root}/mismatch", "--train", "{root}/train.csv",
      "--model-dir", "{root}/ft"), "{root}/mismatch/vocab.txt: 30522 tokens but the model's token embedding"),
    # malformed configs
    (("pretrain", "--config", "{root}/bad.yaml"), "{root}/bad.yaml: cannot parse"),
    (("pretrain", "--config", "{root}/bad.json"), "{root}/bad.json: cannot parse"),
    (("pretrain", "--config", "{root}/unknown_key.json"), "{root}/unknown_key.json: unknown option(s) learning_rat"),
    (("pretrain", "--bert-config", "{root}/bad.json", "--vocab", "{root}/clf/vocab.txt", "--train-files",
      "{root}/train.csv", "--model-dir", "{root}/pre"), "{root}/bad.json: invalid JSON at line 1"),
    (("convert", "--from", "{root}/hf", "--to", "{root}/out"), "{root}/hf/config.json: invalid JSON at line 1"),
    # unknown task / name / value
    (("finetune", "--task", "classification", "--glue-task", "sst-3", "--init", "{root}/clf", "--train",
      "{root}/train.csv", "--model-dir", "{root}/ft"), "unknown GLUE task 'sst-3'"),
    (("pretrain", "--preset", "huge", "--vocab", "{root}/clf/vocab.txt", "--train-files", "{root}/train.csv",
      "--model-dir", "{root}/pre"), "unknown preset 'huge'"),
    # missing files
    (("predict", "--model", "{root}/clf", "--input", "{root}/missing.txt"), "{root}/missing.txt: cannot read"),
    (("evaluate", "--model-dir", "{root}/clf", "--eval", "{root}/missing.csv"), "{root}/missing.csv: file not found"),
    (("tokenize", "--vocab", "{root}/missing_vocab.txt"), "{root}/missing_vocab.txt"),
    (("finetune", "--task", "ner", "--init", "{root}/clf", "--train", "{root}/missing.conll",
      "--model-dir", "{root}/ft"), "{root}/missing.conll"),
])
def test_bad_input_names_file_field_value_in_one_line(folders, capsys, args, message):
    code, _, err = _main(capsys, *(a.format(root=folders) for a in args))
    assert code == 1
    assert message.format(root=folders) in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.startswith(f"bert-keras {args[0]}: error: ")


def test_debug_shows_the_exception(folders):
    from bert_keras.cli import main
    from bert_keras.errors import BertKerasError

    for args in (["--debug", "convert"], ["convert", "--debug"]):
        with pytest.raises(BertKerasError, match="token embedding has 100 rows"):
            main(args + ["--from", str(folders / "mismatch"), "--to", str(folders / "out")])


# --------------------------------------------------------------------------- predict
def test_predict_reads_argv_file_and_stdin_and_matches_the_model(folders, capsys, monkeypatch):
    import numpy as np

    import bert_keras as bk
    from bert_keras.finetuning import checkpoint_tokenizer

    texts = ["a gorgeous, witty, seductive movie.", "flat, boring and far too long.", "Überraschend gut!"]
    clf = folders / "clf"
    code, out, err = _main(capsys, "predict", "--model", clf, *texts)
    assert code == 0, err
    from_argv = [json.loads(line) for line in out.splitlines()]

    (folders / "texts.txt").write_text("\n".join(texts) + "\n\n", encoding="utf-8")
    code, out, err = _main(capsys, "predict", "--model", clf, "--input", folders / "texts.txt",
                           "--output", folders / "pred.jsonl", "--batch-size", "2")
    assert code == 0, err
    # summary and progress bar; the blank last line keeps its place with an error record
    assert f"wrote 4 records to {folders / 'pred.jsonl'}: 3 predictions, 1 error record" in out and "3/3" in out
    from_file = [json.loads(line) for line in (folders / "pred.jsonl").read_text(encoding="utf-8").splitlines()]
    assert from_file.pop() == {"line": 4, "error": "blank line: no text to classify"}

    code, out, err = _main(capsys, "predict", "--model", clf, stdin="\n".join(texts) + "\n", monkeypatch=monkeypatch)
    assert code == 0, err
    from_stdin = [json.loads(line) for line in out.splitlines()]

    assert from_argv == from_file == from_stdin
    assert [r["text"] for r in from_argv] == texts
    model = bk.load_checkpoint(clf, task="classification")
    feats = checkpoint_tokenizer(clf)(texts, seq_len=24)
    logits = np.asarray(model(feats, training=False))
    want = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    got = np.array([[r["probabilities"]["negative"], r["probabilities"]["positive"]] for r in from_argv])
    np.testing.assert_allclose(got, want, atol=1.2e-6)  # measured 1.2e-7
    assert [r["label"] for r in from_argv] == [["negative", "positive"][i] for i in want.argmax(-1)]
