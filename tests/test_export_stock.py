"""Exports that run on stock runtimes: no tensorflow-text anywhere, Google-exact ids.

* WordPiece in core TensorFlow ops equals Google's `FullTokenizer`
  (tf-models-official) on the multilingual tokenizer corpus, in both casings,
  with the real MiniLM vocabulary and a cased vocabulary learned here.
* The SavedModel (`serving_default` text + `serve_ids`) of the real MiniLM with
  a classifier head loads and runs in a fresh process in which
  `tensorflow_text` cannot be imported, and gives the Keras model's logits on
  awkward raw strings; `saved_model_cli run` feeds it text.
* Every op of every function of every export is a core TensorFlow op.
* The ids the text signature builds equal Google's on the corpus and the
  2,562 real Rotten Tomatoes dev snippets, up to the truncation.
* The TF-Hub-convention export (`preprocessor/` + `encoder/`) reproduces
  `load_checkpoint(MiniLM)`, directly and through `tensorflow_hub.KerasLayer`
  in a tf_keras model that fine-tunes.
"""

import json
import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
from tests.conftest import reference, tf_models  # noqa: E402

tokenization = tf_models("official.nlp.tools.tokenization")  # the tests using it: NEEDS_TF_MODELS

import bert_keras as bk  # noqa: E402
from bert_keras import samples  # noqa: E402
from bert_keras.checkpoints import load_checkpoint, save_checkpoint  # noqa: E402
from bert_keras.export import export_saved_model  # noqa: E402
from bert_keras.text.tokenizer import BertTokenizer  # noqa: E402
from bert_keras.text.vocab import RESERVED_TOKENS, count_words, save_vocab  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ_LEN = 128
MAX_CHARS = 200  # ours and Google's original limit (tf-models-official's fork says 400)
ONE_MB = ("word " * 200_000).strip()
RAW_STRINGS = [
    b"A gorgeous, witty and deeply moving film.",
    "我喜欢这部电影。東京タワー".encode(),
    "Café déjà vu, naïve résumé, ΟΔΟΣ Σ".encode(),
    "🎬🍿 great 👍🏽 fun".encode(),
    b"ctrl \x00\x01\x07 tab\tnl\n \x7f end",
    b"",
    b"   \t\n  ",
    ONE_MB.encode(),
    b"\xff\xfe bad \xc3\x28 utf8 \xe2\x82",
]
# Measured on 2 CPU cores: largest |logit difference| fresh-process SavedModel vs in-process
# Keras (real 6-layer MiniLM, sharpened head) 8.9e-7; bound ~10x.
LOGIT_BOUND = 1e-5
# Measured: TF-Hub encoder vs load_checkpoint(MiniLM): pooled 1.8e-7, sequence 2.9e-6.
HUB_BOUND = 3e-5


def _corpus_lines():
    with open(os.path.join(HERE, "data", "tokenizer_corpus.txt"), "rb") as f:
        lines = f.read().split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line for line in lines if not line.startswith(b"#")]


def _google(vocab, lower_case):
    google = tokenization.FullTokenizer(vocab, do_lower_case=lower_case)
    google.wordpiece_tokenizer.max_input_chars_per_word = MAX_CHARS
    return google


def _google_ids(google, text):
    return google.convert_tokens_to_ids(google.tokenize(text))


def _packed(google, text, cls_id, sep_id, seq_len=SEQ_LEN):
    ids = [cls_id] + _google_ids(google, text)[: seq_len - 2] + [sep_id]
    return ids + [0] * (seq_len - len(ids))


@pytest.fixture(scope="module")
def vocab_path(minilm_dir):
    return os.path.join(minilm_dir, "vocab.txt")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("stock")


@pytest.fixture(scope="module")
def cased_vocab(workdir):
    """A cased WordPiece vocabulary built from real text (the corpus and Rotten Tomatoes snippets).

    Every character seen, word-initial and as a `##` continuation (so most
    words are covered), the frequent whole words, and frequent word-initial
    and `##` pieces of 2-6 characters: many words split into several pieces.
    Duplicated lines at the end exercise Google's rule (the last line's id wins).
    (tensorflow-text's learner takes minutes for this much text; counting is enough.)
    """
    import collections

    (train, _), _ = samples.rotten_tomatoes_split()
    lines = [line.decode("utf-8", "ignore") for line in _corpus_lines()] + train[:2000]
    counts = count_words(lines, lower_case=False)
    chars = sorted({c for w in counts for c in w})
    heads, tails = collections.Counter(), collections.Counter()
    for word, n in counts.items():
        for k in range(2, min(6, len(word) - 1) + 1):
            heads[word[:k]] += n
            tails["##" + word[-k:]] += n
    words = [w for w, _ in counts.most_common(1500)]
    vocab = list(RESERVED_TOKENS) + chars + ["##" + c for c in chars] + words
    vocab += [h for h, _ in heads.most_common(600)] + [t for t, _ in tails.most_common(600)]
    vocab = list(dict.fromkeys(vocab)) + ["the", "##s", "The", "[UNK]", "##"]
    path = str(workdir / "cased_vocab.txt")
    save_vocab(vocab, path)
    return path


# --------------------------------------------------------------------------- WordPiece in core ops
@pytest.mark.parametrize("which,lower_case", [("minilm", True), ("minilm", False), ("learned", False)])
def test_core_wordpiece_equals_google_on_the_corpus(which, lower_case, vocab_path, cased_vocab):
    vocab = vocab_path if which == "minilm" else cased_vocab
    lines = _corpus_lines()
    core = BertTokenizer.from_vocab(vocab, lower_case=lower_case, wordpiece="core")
    fn = tf.function(core.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    got = fn(tf.constant(lines)).to_list()
    google = _google(vocab, lower_case)
    want = [_google_ids(google, line) for line in lines]
    differ = [line for line, g, w in zip(lines, got, want) if g != w]
    assert differ == [], f"{len(differ)}/{len(lines)} lines differ, e.g. {differ[:3]}"
    assert len(lines) >= 250 and sum(map(len, want)) > 5_000
    # one line at a time too (other batch compositions take other branches)
    assert [fn(tf.constant([line])).to_list()[0] for line in lines[::16]] == want[::16]


def test_core_wordpiece_unk_and_duplicate_rules_follow_google(tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "aff", "x", "##y", "un", "##",
             "a b", "##aff"]
    path = str(tmp_path / "vocab.txt")
    save_vocab(vocab, path)
    core = BertTokenizer.from_vocab(path, lower_case=True, max_chars_per_word=6, wordpiece="core")
    google = tokenization.FullTokenizer(path, do_lower_case=True)
    google.wordpiece_tokenizer.max_input_chars_per_word = 6
    texts = ["unaff", "unaffable", "xyyyy", "xyyyyy", "xyyyyyy", "xyz un", "aff ##", "a b", "", "UN-aff"]
    got = core.tokenize(tf.constant(texts)).to_list()
    assert got == [_google_ids(google, t) for t in texts]
    # the last line of a duplicated token wins; too long and uncoverable words are one [UNK]
    assert got[0] == [10, 13] and got[1] == [1] and got[4] == [1] and got[5] == [1, 10]


def test_wordpiece_option_round_trips_and_rejects_unknown_names(vocab_path):
    core = BertTokenizer.from_vocab(vocab_path, wordpiece="core")
    clone = BertTokenizer.from_config(core.get_config())
    assert clone.wordpiece == "core" and BertTokenizer.from_vocab(vocab_path).wordpiece == "tensorflow_text"
    text = tf.constant(["Schwarzenegger's naïveté, 中文 " + "x" * 300])
    assert clone.tokenize(text).to_list() == core.with_wordpiece("tensorflow_text").tokenize(text).to_list()
    with pytest.raises(ValueError, match="wordpiece"):
        BertTokenizer.from_vocab(vocab_path, wordpiece="fast")


# --------------------------------------------------------------------------- exports
def _save(folder, model, vocab, lower_case, **metadata):
    save_checkpoint(model, folder, vocab_path=vocab, lower_case=lower_case,
                    metadata={"max_seq_len": SEQ_LEN, "lower_case": lower_case, **metadata})
    return str(folder)


@pytest.fixture(scope="module")
def minilm_clf(workdir, minilm_dir, vocab_path):
    """The real 6-layer MiniLM with a sharpened 2-class head: (folder, SavedModel folder, Keras model)."""
    import keras

    keras.utils.set_random_seed(0)
    model = load_checkpoint(minilm_dir, task="classification", num_classes=2)
    model.classifier.kernel.assign(model.classifier.kernel * 20.0)  # distinct logits and labels
    folder = _save(workdir / "minilm_clf", model, vocab_path, True, task="classification",
                   labels=["negative", "positive"])
    return folder, export_saved_model(folder, str(workdir / "sm_minilm" / "1")), model


@pytest.fixture(scope="module")
def ner_exports(workdir, vocab_path, cased_vocab):
    """Tiny token classifiers (their text signature returns the ids it built), uncased and cased."""
    import keras

    out = {}
    for casing, vocab in (("uncased", vocab_path), ("cased", cased_vocab)):
        keras.utils.set_random_seed(1)
        enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522, num_layers=1))
        folder = _save(workdir / f"ner_{casing}", bk.BertTokenClassifier(enc, num_classes=3), vocab,
                       casing == "uncased", task="ner", labels=["O", "B", "I"])
        out[casing] = (vocab, export_saved_model(folder, str(workdir / f"sm_ner_{casing}")))
    return out


@pytest.fixture(scope="module")
def family_exports(workdir, vocab_path):
    """Span, multiple-choice and regression exports (pair, [B, K] and score paths): {task: SavedModel folder}."""
    import keras

    out = {}
    for task, make, meta in (("span", bk.BertSpanLabeler, {"task": "squad"}),
                             ("multiple_choice", bk.BertMultipleChoice, {"task": "multiple-choice"}),
                             ("regression", lambda enc: bk.BertClassifier(enc, num_classes=1), {"task": "regression"})):
        keras.utils.set_random_seed(2)
        enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522, num_layers=1))
        folder = _save(workdir / task, make(enc), vocab_path, True, **meta)
        out[task] = export_saved_model(folder, str(workdir / f"sm_{task}"))
    return out


FRESH_CLIENT = """
import json, os, sys
sys.modules["tensorflow_text"] = None  # any `import tensorflow_text` now raises ImportError
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as c
from tensorflow.python.framework import op_def_registry

def registered():
    ops = op_def_pb2.OpList()
    ops.ParseFromString(c.TF_GetBuffer(c.TF_GetAllOpList()))
    return sorted(o.name for o in ops.op)

def text_libraries():
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if "tensorflow_text" in line})

before = registered()
model = tf.saved_model.load(sys.argv[1])
texts = [bytes.fromhex(h) for h in json.load(open(sys.argv[2]))]
out = model.signatures["serving_default"](text=tf.constant(texts))
ids = model.signatures["serve_ids"](token_ids=tf.constant([[101, 7592, 102]]), segment_ids=tf.constant([[0, 0, 0]]),
                                   padding_mask=tf.constant([[1, 1, 1]]))
try:
    import tensorflow_text  # noqa: F401
    blocked = False
except ImportError:
    blocked = True
print(json.dumps({"logits": out["logits"].numpy().tolist(), "label": [x.decode() for x in out["label"].numpy()],
                  "ids_logits": ids["logits"].numpy().tolist(), "blocked": blocked,
                  "op_registered": op_def_registry.get("FastWordpieceTokenizeWithOffsets") is not None,
                  "text_libraries": text_libraries(), "ops_before": before, "ops_after": registered(),
                  "project_imported": sorted(m for m in sys.modules if m.startswith("bert_keras"))}))
"""


def _run(args, timeout=600):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH="")
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def fresh(minilm_clf, workdir):
    """FRESH_CLIENT's answer on the MiniLM SavedModel and RAW_STRINGS."""
    data = workdir / "raw.json"
    data.write_text(json.dumps([t.hex() for t in RAW_STRINGS]))
    out = _run([sys.executable, "-c", textwrap.dedent(FRESH_CLIENT), minilm_clf[1], str(data)])
    return json.loads(out.strip().splitlines()[-1])


def test_fresh_process_without_tensorflow_text_serves_raw_strings_like_keras(fresh, minilm_clf):
    folder, sm_dir, model = minilm_clf
    assert fresh["blocked"] and not fresh["op_registered"] and fresh["text_libraries"] == []
    assert fresh["ops_after"] == fresh["ops_before"]  # loading registered no op library
    assert fresh["project_imported"] == []
    assert sorted(os.listdir(sm_dir)) == ["assets", "assets.extra", "fingerprint.pb", "saved_model.pb", "variables"]
    tok = BertTokenizer.from_vocab(os.path.join(folder, "vocab.txt"))  # the tensorflow-text WordPiece
    feats = tok(tf.constant(RAW_STRINGS), seq_len=SEQ_LEN)
    want = np.asarray(model(feats, training=False))
    err = np.abs(np.asarray(fresh["logits"]) - want).max()
    print(f"fresh-process SavedModel vs Keras, max |logit difference| {err:.2e}")
    assert err < LOGIT_BOUND
    assert fresh["label"] == [["negative", "positive"][i] for i in want.argmax(-1)]
    assert len(set(np.round(want[:, 0], 3))) >= 6  # the inputs really differ
    ids = {k: np.array(v, "int32") for k, v in (("token_ids", [[101, 7592, 102]]), ("segment_ids", [[0, 0, 0]]),
                                                 ("padding_mask", [[1, 1, 1]]))}
    np.testing.assert_allclose(fresh["ids_logits"], np.asarray(model(ids, training=False)), atol=LOGIT_BOUND)
    # the empty and whitespace-only strings are [CLS] [SEP]; the 1 MB string is truncated
    assert feats["padding_mask"].numpy().sum(-1).tolist()[5:8] == [2, 2, SEQ_LEN]


def test_saved_model_cli_runs_the_text_signature(ner_exports):
    vocab, sm_dir = ner_exports["uncased"]
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    text = "A gorgeous, witty film."
    out = _run([cli, "run", "--dir", sm_dir, "--tag_set", "serve", "--signature_def", "serving_default",
                "--input_exprs", f"text=[{text!r}]"])
    assert "Result for output key label" in out and "Result for output key logits" in out
    google = _google(vocab, True)
    want = _packed(google, text, google.vocab["[CLS]"], google.vocab["[SEP]"])[:9]
    printed = " ".join(out.split("Result for output key token_ids", 1)[1].replace("[", " ").split())
    assert printed.startswith(": " + " ".join(map(str, want)))


def _graph_ops(sm_dir):
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(sm_dir, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    ops = set()
    for graph in sm.meta_graphs:
        ops |= {n.op for n in graph.graph_def.node}
        for fn in graph.graph_def.library.function:
            ops |= {n.op for n in fn.node_def}
    return ops


@pytest.fixture(scope="module")
def text_ops(fresh):
    """Op names tensorflow-text registers: this process's ops after importing it, minus a blocked process's."""
    import tensorflow_text  # noqa: F401
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session as c

    ops = op_def_pb2.OpList()
    ops.ParseFromString(c.TF_GetBuffer(c.TF_GetAllOpList()))
    names = {o.name for o in ops.op} - set(fresh["ops_after"])
    assert {"FastWordpieceTokenizeWithOffsets", "FastBertNormalize", "WordpieceTokenizeWithOffsets"} <= names
    return names


def _assert_core_ops_only(folders, text_ops):
    for folder in folders:
        ops = _graph_ops(folder)
        if not folder.endswith("encoder"):  # the tokenizer is there
            assert {"UnicodeDecode", "Substr", "StringToHashBucketFast", "LowerBound"} <= ops, folder
        assert ops & text_ops == set(), folder


def test_every_function_of_every_export_holds_core_ops_only(text_ops, minilm_clf, ner_exports, hub_export, tmp_path,
                                                            vocab_path):
    import keras

    # classification (real MiniLM), token classification (both casings), the TF Hub pair;
    # span and multiple choice below
    _assert_core_ops_only([minilm_clf[1], *(sm for _, sm in ner_exports.values()), *hub_export.values()], text_ops)
    # the check sees a tensorflow-text op where there is one
    tok = BertTokenizer.from_vocab(vocab_path)
    archive = keras.export.ExportArchive()
    archive.add_endpoint("serve", lambda t: tok.tokenize(t).flat_values,
                         input_signature=[tf.TensorSpec([None], tf.string)])
    archive.write_out(str(tmp_path / "tf_text"), verbose=False)
    assert "FastWordpieceTokenizeWithOffsets" in _graph_ops(str(tmp_path / "tf_text")) & text_ops


def _text_signature_ids(sm_dir, lines, batch=256):
    serve = tf.saved_model.load(sm_dir).signatures["serving_default"]
    return [row for i in range(0, len(lines), batch)
            for row in serve(text=tf.constant(lines[i:i + batch]))["token_ids"].numpy().tolist()]


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_text_signature_ids_equal_google_on_corpus_and_rotten_tomatoes(casing, ner_exports):
    vocab, sm_dir = ner_exports[casing]
    google = _google(vocab, casing == "uncased")
    cls_id, sep_id = google.vocab["[CLS]"], google.vocab["[SEP]"]
    _, (dev, _) = samples.rotten_tomatoes_split()
    assert len(dev) == 2562
    for name, lines in (("corpus", _corpus_lines()), ("rotten tomatoes dev", [t.encode() for t in dev])):
        got = _text_signature_ids(sm_dir, lines)
        want = [_packed(google, line, cls_id, sep_id) for line in lines]
        same = sum(g == w for g, w in zip(got, want))
        print(f"{casing} {name}: {same}/{len(lines)} lines equal Google's packed ids")
        assert same == len(lines)


@pytest.mark.slow
def test_span_and_multiple_choice_exports_hold_core_ops_and_match_keras(family_exports, text_ops, vocab_path,
                                                                         workdir):
    _assert_core_ops_only(list(family_exports.values()), text_ops)
    tok = BertTokenizer.from_vocab(vocab_path)
    questions, passages = ["Who wrote it?", "Where?"], ["Jane Austen wrote it in 1813.", "In rural England."]
    span = tf.saved_model.load(family_exports["span"]).signatures["serving_default"]
    got = span(text=tf.constant(questions), text_b=tf.constant(passages))
    model = load_checkpoint(str(workdir / "span"), task="span")
    want = model(tok(questions, pairs=passages, seq_len=SEQ_LEN), training=False)
    np.testing.assert_allclose(got["start_logits"].numpy(), np.asarray(want["start_logits"]), atol=1e-5)
    endings = [["a", "b c"], ["d", "e"]]
    mc = tf.saved_model.load(family_exports["multiple_choice"]).signatures["serving_default"]
    got = mc(text=tf.constant(questions), text_b=tf.constant(endings))
    model = load_checkpoint(str(workdir / "multiple_choice"), task="multiple_choice")
    flat = tok([q for q in questions for _ in range(2)], pairs=[e for row in endings for e in row], seq_len=SEQ_LEN)
    want = model({k: tf.reshape(v, [2, 2, SEQ_LEN]) for k, v in flat.items()}, training=False)
    np.testing.assert_allclose(got["logits"].numpy(), np.asarray(want), atol=1e-5)


# --------------------------------------------------------------------------- TF-Hub convention
@pytest.fixture(scope="module")
def hub_export(workdir, minilm_dir):
    """`bert-keras export --format tfhub` of the real MiniLM folder: {"preprocessor": ..., "encoder": ...}."""
    out = workdir / "hub"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-m", "bert_keras", "export", "--model-dir", minilm_dir, "--out", str(out),
                           "--format", "tfhub"], capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    paths = json.loads(proc.stdout.strip().splitlines()[-1])
    assert paths == {name: str(out / name) for name in ("preprocessor", "encoder")}
    return paths


def _real_sentences(n=8):
    _, (dev, _) = samples.rotten_tomatoes_split()
    return dev[:n]


def test_tfhub_preprocessor_and_encoder_reproduce_load_checkpoint(hub_export, minilm_dir):
    pre = tf.saved_model.load(hub_export["preprocessor"])
    enc = tf.saved_model.load(hub_export["encoder"])
    tok = BertTokenizer.from_vocab(os.path.join(minilm_dir, "vocab.txt"))
    a, b = _real_sentences(8)[:4], _real_sentences(8)[4:]
    inputs = pre(tf.constant(a))
    feats = tok(tf.constant(a), seq_len=128)
    assert sorted(inputs) == ["input_mask", "input_type_ids", "input_word_ids"]
    np.testing.assert_array_equal(inputs["input_word_ids"].numpy(), feats["token_ids"].numpy())
    np.testing.assert_array_equal(inputs["input_mask"].numpy(), feats["padding_mask"].numpy())
    np.testing.assert_array_equal(inputs["input_type_ids"].numpy(), feats["segment_ids"].numpy())
    # tokenize: [B, (words), (pieces)], Google's words
    words = pre.tokenize(tf.constant(a))
    assert words.ragged_rank == 2 and words.to_list() == tok.tokenize_words(tf.constant(a)).to_list()
    # bert_pack_inputs: pairs, any seq_length, ragged rank 1 or 2
    pair = pre.bert_pack_inputs([pre.tokenize(tf.constant(a)), pre.tokenize(tf.constant(b)).merge_dims(1, 2)],
                                seq_length=24)
    want = tok(tf.constant(a), pairs=tf.constant(b), seq_len=24)
    np.testing.assert_array_equal(pair["input_word_ids"].numpy(), want["token_ids"].numpy())
    np.testing.assert_array_equal(pair["input_type_ids"].numpy(), want["segment_ids"].numpy())
    special = {k: int(v) for k, v in pre.tokenize.get_special_tokens_dict().items()}
    assert special == {"vocab_size": 30522, "start_of_sequence_id": 101, "end_of_segment_id": 102, "padding_id": 0,
                       "mask_id": 103}

    out = enc(inputs, training=False)
    ref = load_checkpoint(minilm_dir)(feats, training=False)
    for key in ("pooled_output", "sequence_output"):
        err = np.abs(out[key].numpy() - np.asarray(ref[key])).max()
        print(f"TF-Hub encoder {key}: max |difference| {err:.2e}")
        assert err < HUB_BOUND
    np.testing.assert_array_equal(out["default"].numpy(), out["pooled_output"].numpy())
    assert len(out["encoder_outputs"]) == 6
    np.testing.assert_array_equal(out["encoder_outputs"][-1].numpy(), out["sequence_output"].numpy())
    # dropout only when training
    np.testing.assert_array_equal(enc(inputs, training=False)["pooled_output"].numpy(), out["pooled_output"].numpy())
    assert np.abs(enc(inputs, training=True)["pooled_output"].numpy() - out["pooled_output"].numpy()).max() > 1e-3
    keras_encoder = load_checkpoint(minilm_dir)
    assert len(enc.trainable_variables) == len(keras_encoder.trainable_weights) == 79
    assert all(v.trainable for v in enc.trainable_variables)
    signature = enc.signatures["serving_default"](**inputs)
    np.testing.assert_allclose(signature["encoder_outputs_5"].numpy(), out["sequence_output"].numpy(), atol=1e-6)


def _import_tensorflow_hub():
    # tensorflow_hub 0.16 imports pkg_resources.parse_version, which setuptools >= 81 no longer ships
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        from packaging.version import parse

        sys.modules["pkg_resources"] = types.SimpleNamespace(parse_version=parse)
    return reference("tensorflow_hub"), reference("tf_keras")


def test_tfhub_keras_layer_in_tf_keras_reproduces_and_fine_tunes(hub_export, minilm_dir):
    hub, tf_keras = _import_tensorflow_hub()
    pre = hub.KerasLayer(hub_export["preprocessor"])
    enc = hub.KerasLayer(hub_export["encoder"], trainable=True)
    text = tf_keras.layers.Input(shape=(), dtype=tf.string)
    outputs = enc(pre(text))
    features = tf_keras.Model(text, outputs)
    sentences = _real_sentences(16)
    got = features(tf.constant(sentences[:4]), training=False)
    tok = BertTokenizer.from_vocab(os.path.join(minilm_dir, "vocab.txt"))
    ref = load_checkpoint(minilm_dir)(tok(tf.constant(sentences[:4]), seq_len=128), training=False)
    for key in ("pooled_output", "sequence_output"):
        assert np.abs(got[key].numpy() - np.asarray(ref[key])).max() < HUB_BOUND
    assert len(enc.trainable_weights) == 79  # the encoder's Keras trainable weights

    # the TF Hub fine-tuning recipe: tokenize + bert_pack_inputs at a shorter length, a new head
    loaded = hub.load(hub_export["preprocessor"])
    tokens = hub.KerasLayer(loaded.tokenize)(text)
    packed = hub.KerasLayer(loaded.bert_pack_inputs, arguments=dict(seq_length=32))([tokens])
    logits = tf_keras.layers.Dense(2)(enc(packed)["pooled_output"])
    classifier = tf_keras.Model(text, logits)
    classifier.compile(optimizer=tf_keras.optimizers.Adam(1e-4),
                       loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    _, (dev, labels) = samples.rotten_tomatoes_split()
    x, y = tf.constant(dev[:16]), tf.constant(labels[:16])
    before = [w.numpy().copy() for w in enc.trainable_weights[:3]]
    history = classifier.fit(x, y, batch_size=16, epochs=6, verbose=0, shuffle=False)
    losses = history.history["loss"]
    print(f"tf_keras + hub.KerasLayer fine-tuning losses: {[round(v, 3) for v in losses]}")
    assert losses[-1] < 0.8 * losses[0]
    assert any(np.abs(w.numpy() - b).max() > 0 for w, b in zip(enc.trainable_weights[:3], before))
