"""An output never replaces what was not ours: inputs, model folders, links, lock files, foreign files.

Each check runs the real command (in process, or as a real process where a second
process or a pipe is the point) against an output path that names something a user
would lose, and asserts the one-line refusal and that the thing is unchanged; links
are real symbolic links.
"""

import json
import os
import select
import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from bert_keras.checkpoints import save_checkpoint  # noqa: E402
from bert_keras.errors import BertKerasError  # noqa: E402
from bert_keras.locks import single_writer  # noqa: E402
from bert_keras.writing import atomic_write  # noqa: E402
from tests.test_data_safety import LABELS, SEQ_LEN, TEXTS, _classifier, _one_line_error, _tree  # noqa: E402
from tests.test_data_safety import cli, clf_dir, vocab_file  # noqa: E402,F401
from tests.test_single_writer import ENV, Holder  # noqa: E402

CORPUS = "the film was good . the plot was a mess .\nit was witty and moving , but not fun .\n" * 20


def _read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def nan_dir(tmp_path_factory, vocab_file):
    """A classifier folder whose weights are all NaN (what a diverged run would have saved)."""
    clf = _classifier(vocab_file)
    for w in clf.weights:
        w.assign(np.full(w.shape, np.nan, w.dtype))
    folder = tmp_path_factory.mktemp("nan") / "best"
    save_checkpoint(clf, folder, metadata={"task": "classification", "labels": ["neg", "pos"],
                                           "max_seq_len": SEQ_LEN, "lower_case": True})
    return str(folder)


# --------------------------------------------------------------------------- inputs and model folders
def test_vocab_refuses_to_write_over_its_corpus(tmp_path, cli):
    corpus = tmp_path / "c.txt"
    corpus.write_text(CORPUS)
    _one_line_error(cli("vocab", "--input", corpus, "--out", corpus, "--size", 100, "--min-count", 1),
                    f"{corpus}: is the input --input")
    assert corpus.read_text() == CORPUS
    link = tmp_path / "c-link.txt"  # the same file by another name
    link.symlink_to(corpus)
    _one_line_error(cli("vocab", "--input", corpus, "--out", link, "--size", 100, "--min-count", 1), "is the input")
    assert corpus.read_text() == CORPUS


def test_vocab_replaces_a_previous_vocabulary_but_not_another_file(tmp_path, cli):
    corpus = tmp_path / "c.txt"
    corpus.write_text(CORPUS)
    out = tmp_path / "vocab.txt"
    assert cli("vocab", "--input", corpus, "--out", out, "--size", 100, "--min-count", 1).returncode == 0
    first = out.read_text().split()
    assert first[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and "film" in first
    proc = cli("vocab", "--input", corpus, "--out", out, "--size", 100, "--min-count", 1, "--reserved", "[X]")
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().split()[5] == "[X]"  # the previous vocabulary was replaced
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes on the film\n")
    _one_line_error(cli("vocab", "--input", corpus, "--out", notes, "--size", 100, "--min-count", 1),
                    f"{notes}: exists and is not a previous vocabulary file")
    assert notes.read_text() == "my notes on the film\n"


def test_predict_refuses_to_write_over_its_input_or_a_file_of_another_kind(tmp_path, clf_dir, cli):
    data = tmp_path / "d.txt"
    data.write_text("a good film\nflat and dull\n")
    _one_line_error(cli("predict", "--model", clf_dir, "--input", data, "--output", data),
                    f"{data}: is the input --input")
    assert data.read_text() == "a good film\nflat and dull\n"
    other = tmp_path / "reviews.txt"  # a text file, not earlier predictions
    other.write_text("great fun\n")
    _one_line_error(cli("predict", "--model", clf_dir, "--output", other, "a good film"),
                    "exists and is not a previous predictions file")
    assert other.read_text() == "great fun\n"


def test_evaluate_refuses_its_eval_file_and_the_model_folders_weights(tmp_path, clf_dir, cli):
    import shutil

    run = tmp_path / "run"
    best = run / "best"
    shutil.copytree(clf_dir, best)
    weights = _read(best / "model.safetensors")
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in zip(TEXTS, LABELS)))
    before = dev.read_text()
    _one_line_error(cli("evaluate", "--model-dir", best, "--eval", dev, "--output", dev), "is the input --eval")
    assert dev.read_text() == before
    _one_line_error(cli("evaluate", "--model-dir", best, "--eval", dev, "--output", best / "model.safetensors"),
                    "is inside --model-dir")
    assert _read(best / "model.safetensors") == weights
    # another model folder, not the one evaluated: still refused
    _one_line_error(cli("evaluate", "--model-dir", clf_dir, "--eval", dev, "--output", best / "model.safetensors"),
                    f"is inside the model folder {best} (it holds")
    assert _read(best / "model.safetensors") == weights
    _one_line_error(cli("evaluate", "--model-dir", clf_dir, "--eval", dev, "--batch-size", 0),
                    "--batch-size must be >= 1, got 0")


def test_predict_refuses_to_write_into_a_saved_model(tmp_path, clf_dir, cli):
    sm = tmp_path / "sm"
    (sm / "variables").mkdir(parents=True)
    (sm / "saved_model.pb").write_bytes(b"\x08\x01graph")
    (sm / "variables" / "variables.index").write_bytes(b"index")
    before = _tree(sm)
    _one_line_error(cli("predict", "--model", clf_dir, "--output", sm / "saved_model.pb", "a good film"),
                    f"is inside the model folder {sm} (it holds saved_model.pb)")
    _one_line_error(cli("predict", "--model", clf_dir, "--output", sm / "variables" / "variables.index",
                        "a good film"), "is inside the model folder")
    assert _tree(sm) == before


# --------------------------------------------------------------------------- links and lock files
def test_one_lock_per_real_folder_whatever_its_spelling(tmp_path):
    real = tmp_path / "cc"
    real.mkdir()
    link = tmp_path / "cclink"
    link.symlink_to(real)
    holder = Holder(real)  # another live process writing the folder under its real name
    try:
        with pytest.raises(BertKerasError, match="another bert-keras writer is writing it"):
            with single_writer(link):
                pass
        with pytest.raises(BertKerasError, match="another bert-keras writer is writing it"):
            with single_writer(tmp_path / "x" / ".." / "cc"):
                pass
    finally:
        holder.release()


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_a_lock_file_that_is_a_link_is_refused_never_written(tmp_path, clf_dir, cli, kind):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    lock = tmp_path / ".out.jsonl.lock"
    if kind == "symlink":
        lock.symlink_to(victim)
    elif kind == "hardlink":
        os.link(victim, lock)
    else:
        os.mkfifo(lock)
    line = _one_line_error(cli("predict", "--model", clf_dir, "--output", tmp_path / "out.jsonl", "a good film"),
                           f"its lock file {lock} is")
    assert "refusing" in line
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "out.jsonl").exists()


def test_a_linked_output_file_is_written_through_and_stays_a_link(tmp_path, clf_dir, cli):
    target = tmp_path / "elsewhere" / "predictions.jsonl"
    target.parent.mkdir()
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)  # dangling until the first write
    for text in ("a good film", "flat and dull"):
        proc = cli("predict", "--model", clf_dir, "--output", link, text)
        assert proc.returncode == 0, proc.stderr
        assert os.path.islink(link) and os.readlink(link) == str(target)
        assert json.loads(target.read_text())["text"] == text
    assert sorted(os.listdir(tmp_path)) == ["elsewhere", "latest.jsonl"]
    assert os.listdir(target.parent) == ["predictions.jsonl"]
    atomic_write(link, lambda tmp: open(tmp, "w").write("{}\n"))
    assert os.path.islink(link) and target.read_text() == "{}\n"


def test_a_linked_export_or_convert_folder_is_replaced_through_the_link(tmp_path, clf_dir, cli):
    target = tmp_path / "disk2" / "sentiment"
    target.mkdir(parents=True)
    link = tmp_path / "exlink"
    link.symlink_to(target)
    for _ in range(2):  # a new export, then one replacing the previous
        proc = cli("export", "--model-dir", clf_dir, "--out", link)
        assert proc.returncode == 0, proc.stderr
        assert os.path.islink(link) and os.readlink(link) == str(target)
        assert os.path.isfile(target / "saved_model.pb")
    assert sorted(os.listdir(tmp_path)) == ["disk2", "exlink"]  # no temporaries left, the link kept
    assert os.listdir(target.parent) == ["sentiment"]
    converted = tmp_path / "disk2" / "hf"
    converted.mkdir()
    to = tmp_path / "tolink"
    to.symlink_to(converted)
    proc = cli("convert", "--from", clf_dir, "--to", to, "--format", "huggingface")
    assert proc.returncode == 0, proc.stderr
    assert os.path.islink(to) and os.path.isfile(converted / "config.json")


# --------------------------------------------------------------------------- predict: input and output
def test_predict_writes_valid_json_with_null_and_an_error_for_non_finite_values(tmp_path, nan_dir, cli):
    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} is not JSON: {text}"))

    proc = cli("predict", "--model", nan_dir, "a good film", "flat and dull")
    assert proc.returncode == 0, proc.stderr
    records = [strict(line) for line in proc.stdout.splitlines()]
    assert len(records) == 2
    for record in records:
        assert record["probabilities"] == {"neg": None, "pos": None}
        assert record["error"].startswith("not finite: probabilities")
    assert "2 predictions held NaN or infinite values" in proc.stderr
    out = tmp_path / "p.jsonl"
    assert cli("predict", "--model", nan_dir, "--output", out, "great fun").returncode == 0
    assert strict(out.read_text())["probabilities"]["pos"] is None


def test_predict_format_text_reads_a_brace_as_text_and_jsonl_refuses_plain_lines(tmp_path, clf_dir, cli):
    data = tmp_path / "reviews.txt"
    data.write_text("{sic} the worst\ngreat fun\n")
    line = _one_line_error(cli("predict", "--model", clf_dir, "--input", data), f"{data}:1: invalid JSON")
    assert "--format text" in line
    proc = cli("predict", "--model", clf_dir, "--input", data, "--format", "text")
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x)["text"] for x in proc.stdout.splitlines()] == ["{sic} the worst", "great fun"]
    _one_line_error(cli("predict", "--model", clf_dir, "--input", data, "--format", "jsonl"), f"{data}:1:")
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text('{"text": "great fun"}\n"just a string"\n')
    _one_line_error(cli("predict", "--model", clf_dir, "--input", jsonl, "--format", "jsonl"),
                    f"{jsonl}:2: a string", "expects a JSON object")


def test_predict_refuses_a_json_line_with_a_key_twice(tmp_path, clf_dir, cli):
    data = tmp_path / "r.jsonl"
    data.write_text('{"text": "great fun"}\n{"text": "a good film", "text": "zzz"}\n')
    _one_line_error(cli("predict", "--model", clf_dir, "--input", data), f'{data}:2: key "text" appears twice')


@pytest.mark.parametrize("value", [0, 2, 513, -1])
def test_predict_and_export_refuse_a_max_seq_len_outside_3_to_512(tmp_path, clf_dir, cli, value):
    _one_line_error(cli("predict", "--model", clf_dir, "--max-seq-len", value, "a good film"),
                    f"--max-seq-len must be in 3..512 (omit it for the folder's), got {value}")
    _one_line_error(cli("export", "--model-dir", clf_dir, "--out", tmp_path / "sm", "--max-seq-len", value),
                    f"got {value}")
    assert not (tmp_path / "sm").exists()


def test_predict_help_says_models_must_be_trusted(cli):
    from bert_keras.cli import predict

    assert "predict only with models you trust" in " ".join(predict.__doc__.split())


def test_predict_writes_the_first_records_before_its_input_ends(clf_dir):
    """Streaming: records of the first 1,024 lines come out while stdin is still open."""
    from bert_keras.cli.predict import CHUNK_LINES

    proc = subprocess.Popen([sys.executable, "-m", "bert_keras", "predict", "--model", clf_dir],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    try:
        proc.stdin.write(b"a good film\n" * CHUNK_LINES)
        proc.stdin.flush()  # and kept open: more lines may come
        ready, _, _ = select.select([proc.stdout], [], [], 180)
        assert ready, "no record came out before the input ended"
        first = json.loads(proc.stdout.readline())
        assert first["text"] == "a good film" and first["label"] in ("neg", "pos")
        proc.stdin.write(b"flat and dull\n")
        proc.stdin.close()
        rest = proc.stdout.read().decode().splitlines()
        assert proc.wait(timeout=120) == 0, proc.stderr.read().decode()
        assert len(rest) == CHUNK_LINES and json.loads(rest[-1])["text"] == "flat and dull"
    finally:
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------- corpora that are not text
@pytest.mark.parametrize("data,message", [
    (bytes(range(256)) * 40, "is not UTF-8 text (byte 0x00 at column 1"),
    ("the film was good\n".encode("utf-16"), "is UTF-16 (byte-order mark ff fe)"),
    ("déjà vu, très émouvant\n".encode("latin-1") * 50, "is not UTF-8 text (byte 0xe9 at column 2"),
], ids=["binary", "utf-16", "latin-1"])
def test_vocab_refuses_a_corpus_that_is_not_utf8_text(tmp_path, cli, data, message):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(data)
    _one_line_error(cli("vocab", "--input", corpus, "--out", tmp_path / "vocab.txt", "--size", 20), message,
                    f"{corpus}:1:")
    assert not (tmp_path / "vocab.txt").exists()


def test_a_stray_bad_byte_in_a_utf8_corpus_is_kept_as_google_does(tmp_path):
    from bert_keras.data.utf8 import check_utf8_text

    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(CORPUS.encode() * 10 + b"one stray \xff byte\n" + "naïve café\n".encode())
    check_utf8_text(corpus)  # 1 bad byte in 16 KB: read, the byte dropped, as Google's reader does
    corpus.write_bytes(b"\xff" * 10 + CORPUS.encode())
    with pytest.raises(BertKerasError, match=r"corpus.txt:1: corpus is not UTF-8 text \(byte 0xff at column 1; "
                                             r"10 of its first 1,650 bytes"):
        check_utf8_text(corpus)
