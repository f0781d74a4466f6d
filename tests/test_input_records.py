"""Input records line up and keep their values: predict's one record per line, JSON types, labels, vocabularies.

Tiny models (2 layers, H=128) over a small vocabulary written here.
"""

import io
import json
import os
import subprocess
import sys

import pytest

import bert_keras as bk
from bert_keras import tasks
from bert_keras.errors import BertKerasError, DataError

WORDS = ("the a film movie plot is was good bad great awful fun witty dull mess jokes fall flat "
         "gorgeous moving deeply and but not it").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + [".", ",", "!", "##s", "##ly"]


def _main(capsys, *args, stdin=None, monkeypatch=None):
    """`bert-keras ARGS` in process, ``stdin`` given as bytes: (exit status, stdout, stderr)."""
    from tests.test_input_handling import _main as main

    stream = None if stdin is None else io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    return main(capsys, *args, stdin=stream, monkeypatch=monkeypatch)


def _write_vocab(path, tokens):
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Tiny single-text and pair classifiers, and one whose vocabulary repeats a token."""
    import keras

    root = tmp_path_factory.mktemp("records")
    vocab = _write_vocab(root / "vocab.txt", VOCAB)
    dup_vocab = _write_vocab(root / "dup_vocab.txt", VOCAB + ["film"])
    cfg = bk.BertConfig.preset("tiny", vocab_size=len(VOCAB) + 1, max_position_embeddings=32)
    meta = {"task": "classification", "labels": ["neg", "pos"], "max_seq_len": 16}
    for name, extra, v in (("single", {}, vocab), ("pair", {"pair": True}, vocab), ("dup", {}, dup_vocab)):
        keras.utils.set_random_seed(0)
        bk.save_checkpoint(bk.BertClassifier(bk.BertEncoder(cfg), num_classes=2), root / name, vocab_path=v,
                           lower_case=True, metadata={**meta, **extra})
    return root


# --------------------------------------------------------------------------- predict: one record per line
def test_predict_writes_one_record_per_input_line_and_error_records_for_blank_ones(folders, capsys, monkeypatch):
    from bert_keras.export.predict import Predictor

    fed = []
    original = Predictor.predict

    def spy(self, texts, texts_b=None, batch_size=32):
        fed.extend(texts)
        return original(self, texts, texts_b, batch_size)

    monkeypatch.setattr(Predictor, "predict", spy)
    lines = ["a good film", "", "   ", "flat and dull", "\t", '{"text": ""}', '{"text": "great fun"}',
             "witty\u2028and moving"]  # U+2028 is inside a text, not a line end
    data = ("\n".join(lines) + "\n").encode("utf-8")
    (folders / "in.txt").write_bytes(data)
    code, out, err = _main(capsys, "predict", "--model", folders / "single", "--input", folders / "in.txt",
                           "--batch-size", "2")
    assert code == 0, err
    records = [json.loads(x) for x in out.splitlines()]
    assert len(records) == len(lines) == 8
    assert records[1] == {"line": 2, "error": "blank line: no text to classify"}
    assert records[2] == {"line": 3, "error": "blank line: no text to classify"}
    assert records[4] == {"line": 5, "error": "blank line: no text to classify"}
    assert records[5] == {"line": 6, "error": 'field "text" is empty: no text to classify'}
    assert [records[i]["text"] for i in (0, 3, 6, 7)] == ["a good film", "flat and dull", "great fun",
                                                          "witty\u2028and moving"]
    assert sorted(fed) == sorted(["a good film", "flat and dull", "great fun", "witty\u2028and moving"])
    assert f"{folders / 'in.txt'}: 4 of 8 lines got an error record" in err and len(err.strip().splitlines()) == 1
    # each prediction is the one the same text gets on its own
    code, single, _ = _main(capsys, "predict", "--model", folders / "single", "flat and dull")
    assert json.loads(single) == records[3]
    # stdin: the same records; --output: the same file and a summary that counts both kinds
    code, out2, err2 = _main(capsys, "predict", "--model", folders / "single", stdin=data, monkeypatch=monkeypatch)
    assert code == 0 and [json.loads(x) for x in out2.splitlines()] == records
    assert "<stdin>: 4 of 8 lines got an error record" in err2
    code, out3, err3 = _main(capsys, "predict", "--model", folders / "single", "--input", folders / "in.txt",
                             "--output", folders / "out.jsonl")
    assert code == 0, err3
    assert [json.loads(x) for x in (folders / "out.jsonl").read_text(encoding="utf-8").splitlines()] == records
    assert f"wrote 8 records to {folders / 'out.jsonl'}: 4 predictions, 4 error records" in out3


def test_predict_pair_lines_with_an_empty_side_get_error_records(folders, capsys):
    (folders / "pairs.txt").write_text('the plot\tis a mess\n\tjokes fall flat\ngood fun\t \n'
                                       '{"text": "a film", "text_b": ""}\n{"text": "a film", "text_b": "bad"}\n',
                                       encoding="utf-8")
    code, out, err = _main(capsys, "predict", "--model", folders / "pair", "--input", folders / "pairs.txt")
    assert code == 0, err
    records = [json.loads(x) for x in out.splitlines()]
    assert [r.get("error") for r in records] == [
        None, "empty text before the TAB: no text to classify", "empty text_b after the TAB: the model takes pairs",
        'field "text_b" is empty: the model takes pairs', None]
    assert [r.get("line") for r in records[1:4]] == [2, 3, 4]
    assert (records[0]["text_b"], records[4]["text_b"]) == ("is a mess", "bad")


@pytest.mark.parametrize("field,value,message", [
    ("text", "null", 'field "text" is null, expected a string'),
    ("text", "123", 'field "text" is a number (123), expected a string'),
    ("text", '["a", "b"]', 'field "text" is a list (["a", "b"]), expected a string'),
    ("text", "true", 'field "text" is a boolean (true), expected a string'),
    ("text_b", "5", 'field "text_b" is a number (5), expected a string (multiple choice: a list of strings)'),
    ("text_b", '["an end", 2]', 'field "text_b" holds a number (2) at index 1, expected a list of strings'),
])
def test_predict_refuses_non_string_json_text_before_the_model_loads(tmp_path, capsys, monkeypatch, field, value,
                                                                     message):
    import bert_keras.export.predict as export_predict

    def must_not_load(*args, **kwargs):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(export_predict, "load_predictor", must_not_load)
    record = '{"text": "fine"' + (f', "text_b": {value}}}' if field == "text_b" else "}")
    bad = record if field == "text_b" else f'{{"text": {value}}}'
    path = tmp_path / "reviews.jsonl"
    path.write_text('{"text": "a good film"}\n\n{"text": "bad"}\n' + bad + "\n", encoding="utf-8")
    code, out, err = _main(capsys, "predict", "--model", tmp_path, "--input", path)
    assert code == 1 and out == ""
    assert err.strip() == f"bert-keras predict: error: {path}:4: {message}"


def test_predict_refuses_a_json_list_text_b_for_a_model_that_is_not_multiple_choice(folders, capsys):
    (folders / "mc.jsonl").write_text('{"text": "a film", "text_b": ["good", "bad"]}\n', encoding="utf-8")
    code, out, err = _main(capsys, "predict", "--model", folders / "pair", "--input", folders / "mc.jsonl")
    assert code == 1 and out == ""
    assert err.strip().splitlines()[-1] == (
        f'bert-keras predict: error: {folders / "mc.jsonl"}:1: field "text_b" is a list (["good", "bad"]), '
        f"expected a string (a list is for multiple-choice models)")


# --------------------------------------------------------------------------- labels and columns
def test_boolean_labels_are_refused_beside_numbers_and_strings_and_kept_as_a_column(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": "1"}\n{"text": "c", "label": true}\n'
                    '{"text": "d", "label": 0}\n', encoding="utf-8")
    with pytest.raises(DataError) as e:
        tasks.read_examples(path)
    assert str(e.value).startswith(f"{path}:3: field 'label' is true (a JSON boolean) but line 1's label is 1 "
                                   f"(a number)")
    path.write_text('{"text": "a", "label": "pos"}\n{"text": "b", "label": false}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"train.jsonl:2: field 'label' is false \(a JSON boolean\) but line 1's "
                                        r"label is \"pos\" \(a string\)"):
        tasks.read_examples(path)
    # a column of booleans: the classes "false" and "true"
    path.write_text('{"text": "a", "label": true}\n{"text": "b", "label": false}\n{"text": "c", "label": true}\n',
                    encoding="utf-8")
    rows = tasks.read_examples(path)
    assert [r.label for r in rows] == ["true", "false", "true"]
    assert tasks.LabelMap.from_examples(rows).labels == ["false", "true"]
    # numbers and numeric strings are one class per value; distinct integers stay distinct
    path.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": "1"}\n{"text": "c", "label": 1.0}\n'
                    '{"text": "d", "label": 10000000000000001}\n{"text": "e", "label": 10000000000000000}\n'
                    '{"text": "f", "label": "0.10"}\n{"text": "g", "label": 0.1}\n', encoding="utf-8")
    assert [r.label for r in tasks.read_examples(path)] == [
        "1", "1", "1", "10000000000000001", "10000000000000000", "0.1", "0.1"]


def test_columns_reported_are_the_columns_the_file_has(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": 0}\n', encoding="utf-8")
    rows = tasks.read_examples(path)
    assert rows.columns == {"text": "text", "text_b": None, "label": "label"}
    assert tasks.describe_columns(path, rows) == f"{path}: columns text='text', label='label'"
    path.write_text('{"text": "a"}\n{"text": "b"}\n', encoding="utf-8")
    rows = tasks.read_examples(path)
    assert tasks.describe_columns(path, rows) == f"{path}: columns text='text', no label column"
    path.write_text('{"text": "a", "text_b": "c", "label": 1}\n', encoding="utf-8")
    assert tasks.describe_columns(path, tasks.read_examples(path)) == (
        f"{path}: columns text='text', text_b='text_b', label='label'")
    # a column named explicitly that the file lacks is an error, not a silent single-text read
    with pytest.raises(DataError, match=r"train.jsonl: no record has the field 'hyp' named for text_b"):
        tasks.read_examples(path, text_b_field="hyp")
    csv = tmp_path / "train.csv"
    csv.write_text("text,label\na film,1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train.csv:1: no column 'hyp' for text_b \(header: text, label\)"):
        tasks.read_examples(csv, text_b_field="hyp")
    path.write_text('{"text": 123, "label": 1}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"train.jsonl:1: field 'text' is a number \(123\), expected a string"):
        tasks.read_examples(path)


# --------------------------------------------------------------------------- vocabularies
def test_a_repeated_vocabulary_token_is_reported_once_and_takes_the_later_id_like_google(tmp_path, capsys,
                                                                                       monkeypatch):
    import tensorflow as tf

    path = _write_vocab(tmp_path / "vocab.txt", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "hello",
                                                 "##s", "world"])
    code, out, err = _main(capsys, "tokenize", "--vocab", path, stdin=b"hello worlds\n", monkeypatch=monkeypatch)
    assert code == 0, err
    assert out == "6 8 7\n"
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {path}:7: token 'hello' is also on line 5; id 6 (its last line's) is used, "
                        f"as Google's load_vocab does, so id 4 is never produced; 1 more repeated token in this file"]
    # both in-graph WordPiece implementations agree (the later id is Google's load_vocab rule:
    # tests/test_tokenizer.py::test_duplicate_and_blank_vocab_lines_follow_google compares with it)
    for kind in ("tensorflow_text", "core"):
        tok = bk.BertTokenizer.from_vocab(path, wordpiece=kind)
        assert tok.tokenize(tf.constant(["hello worlds"])).to_list() == [[6, 8, 7]]
    assert "warning" not in capsys.readouterr().err  # once per file


def test_a_model_folder_vocabulary_with_a_repeated_token_warns_in_predict(folders, capsys):
    code, out, err = _main(capsys, "predict", "--model", folders / "dup", "a good film")
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"{folders / 'dup' / 'vocab.txt'}:{len(VOCAB) + 1}: token 'film'" in warnings[0]
    assert f"is also on line {VOCAB.index('film') + 1}; id {len(VOCAB)}" in warnings[0]


@pytest.mark.parametrize("data,message", [
    (b"[PAD]\n[UNK]\nab\x00c\n\x1b[31mred\n", ":3: control byte 0x00 at column 3"),
    (b"[PAD]\n[UNK]\ncaf\xe9\n", ":3: not valid UTF-8 (byte 0xe9 at column 4)"),
    (b"\x7fELF\x02\x01\x01\x00\x00\n\xff\xfe", ":1: control byte 0x7f at column 1"),
])
def test_tokenize_refuses_a_binary_vocabulary_before_printing_anything(tmp_path, capsys, monkeypatch, data,
                                                                       message):
    path = tmp_path / "vocab.bin"
    path.write_bytes(data)
    for casing in ((), ("--cased",)):
        code, out, err = _main(capsys, "tokenize", "--vocab", path, *casing, stdin=b"hello\n",
                               monkeypatch=monkeypatch)
        assert code == 1 and out == ""
        assert err.splitlines() == [f"bert-keras tokenize: error: {path}{message}: a vocabulary is UTF-8 text, "
                                    f"one token a line"]
    with pytest.raises(DataError, match=r"vocab.bin" + message.replace("(", r"\(").replace(")", r"\)")):
        bk.BertTokenizer.from_vocab(path)


def test_vocabulary_size_limit_is_counted_while_reading(tmp_path, monkeypatch):
    from bert_keras.text import vocab

    monkeypatch.setattr(vocab, "MAX_VOCAB_SIZE", 3)
    path = tmp_path / "v.txt"
    path.write_text("[UNK]\na\nb\n", encoding="utf-8")
    assert vocab.load_vocab(path) == ["[UNK]", "a", "b"]
    path.write_text("[UNK]\na\nb\nc", encoding="utf-8")  # a last line without its newline counts
    with pytest.raises(DataError, match=r"v.txt: 4 lines, more than the 3 tokens"):
        vocab.load_vocab(path)
    path.write_text("[UNK]\na\nb\nc\nd\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"v.txt: at least 5 lines, more than the 3 tokens"):
        vocab.load_vocab(path)


def test_tokenize_refuses_a_huge_vocabulary_quickly_and_in_little_memory(tmp_path):
    path = tmp_path / "huge_vocab.txt"
    n = 4_194_305
    with open(path, "w", encoding="utf-8") as f:
        f.write("[UNK]\n")
        f.write("".join(f"t{i}\n" for i in range(n - 1)))
    # The peak memory of the process itself: VmHWM (ru_maxrss of a child carries its forking parent's
    # peak, and the test process holds TensorFlow).
    script = (
        "import resource, sys, time\n"
        "from bert_keras.cli import main\n"
        "start = time.perf_counter()\n"
        "code = main(['tokenize', '--vocab', sys.argv[1]])\n"
        "try:\n"
        "    peak = next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:'))\n"
        "except OSError:\n"
        "    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(code, time.perf_counter() - start, peak)\n"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env=env)
    code, seconds, max_rss_kib = proc.stdout.split()
    assert int(code) == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"bert-keras tokenize: error: {path}: at least 4,194,305 lines, more than the 4,194,304 tokens a "
        f"vocabulary can hold (tensorflow-text's WordPiece limit)")
    assert float(seconds) < 10
    assert int(max_rss_kib) * 1024 < 1.5e9


def test_a_tokenizer_built_from_a_list_over_the_limit_is_refused(monkeypatch):
    from bert_keras.text import tokenizer

    monkeypatch.setattr(tokenizer, "MAX_VOCAB_SIZE", 3)
    assert bk.BertTokenizer(["[UNK]", "a", "b"]).vocab_size == 3
    with pytest.raises(DataError, match=r"^vocabulary: 4 tokens, more than the 3 a vocabulary can hold"):
        bk.BertTokenizer(["[UNK]", "a", "b", "c"])
    assert issubclass(DataError, BertKerasError)
