"""Fine-tuning readers and featurizers against Google's reference code and real files.

References: tf-models-official's `FullTokenizer` (Google's tokenization.py),
`classifier_data_lib.convert_single_example`, `squad_lib` (run_squad.py's
reading, windowing and post-processing) and the GLUE column layout of
Google's/Hugging Face's GLUE processors.  Real data: WNUT-16, the SQuAD
fixture, Rotten Tomatoes.
"""

import collections
import json
import pathlib
import random

import numpy as np
import pytest

from bert_keras import samples, tasks
from bert_keras.errors import DataError
from bert_keras.metrics import normalize_answer, squad_evaluate
from bert_keras.tasks import IGNORE_LABEL, LabelMap
from tests.conftest import tf_models

classifier_data_lib = tf_models("official.nlp.data.classifier_data_lib")
squad_lib = tf_models("official.nlp.data.squad_lib")
tokenization = tf_models("official.nlp.tools.tokenization")

DATA = pathlib.Path(__file__).parent / "data" / "tasks"
GLUE = DATA / "glue"


class GoogleTokenizer:
    """Adapter: Google's FullTokenizer behind the featurizers' `tokenize(list)` interface."""

    def __init__(self, vocab_file, lower_case=True):
        self.full = tokenization.FullTokenizer(str(vocab_file), do_lower_case=lower_case)
        self.vocab = [self.full.inv_vocab[i] for i in range(len(self.full.inv_vocab))]

    def tokenize(self, texts):
        return [self.full.convert_tokens_to_ids(self.full.tokenize(t)) for t in texts]


@pytest.fixture(scope="module")
def vocab_file():
    return samples.fetch("minilm") / "vocab.txt"


@pytest.fixture(scope="module")
def google(vocab_file):
    return GoogleTokenizer(vocab_file)


# ----------------------------------------------------------------------------
# GLUE

# (text_a, text_b, label) column indices of Google's run_classifier.py / Hugging
# Face's glue processors, header row skipped; test files have no label.
REFERENCE_COLUMNS = {
    ("cola", "train"): (3, None, 1, False),
    ("cola", "test"): (1, None, None, True),
    ("sst-2", "train"): (0, None, 1, True),
    ("sst-2", "test"): (1, None, None, True),
    ("mrpc", "train"): (3, 4, 0, True),
    ("mrpc", "test"): (3, 4, None, True),
    ("sts-b", "train"): (7, 8, -1, True),
    ("sts-b", "test"): (7, 8, None, True),
    ("mnli", "train"): (8, 9, -1, True),
    ("mnli", "dev_matched"): (8, 9, -1, True),
    ("mnli", "dev_mismatched"): (8, 9, -1, True),
    ("mnli", "test_matched"): (8, 9, None, True),
    ("qnli", "train"): (1, 2, -1, True),
    ("rte", "train"): (1, 2, -1, True),
    ("wnli", "train"): (1, 2, -1, True),
    ("qqp", "train"): (3, 4, 5, True),
    ("qqp", "test"): (1, 2, None, True),
}
FOLDERS = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC", "sts-b": "STS-B", "mnli": "MNLI",
           "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI", "qqp": "QQP"}


def _reference_rows(path, a, b, label, header):
    with open(path, encoding="utf-8-sig") as f:
        lines = [l.rstrip("\n").split("\t") for l in f]
    out = []
    for line in lines[1:] if header else lines:
        try:  # QQP rows with missing fields are skipped (IndexError), as HF does
            out.append((line[a], line[b] if b is not None else None,
                        line[label] if label is not None else None))
        except IndexError:
            continue
    return out


@pytest.mark.parametrize("task,split", sorted(REFERENCE_COLUMNS))
def test_glue_reader_takes_the_reference_columns(task, split):
    path = GLUE / FOLDERS[task] / f"{split}.tsv"
    examples = tasks.read_glue(task, path)
    expected = _reference_rows(path, *REFERENCE_COLUMNS[(task, split)])
    got = [(e.text_a, e.text_b, e.label) for e in examples]
    if task == "sts-b" and split == "train":
        expected = [(x, y, float(s)) for x, y, s in expected]
    assert got == expected
    assert all(e.source.startswith(str(path)) for e in examples)


def test_glue_label_sets_and_counts():
    assert tasks.glue_label_map("MNLI").labels == ["contradiction", "entailment", "neutral"]
    assert tasks.glue_label_map("sst2").labels == ["0", "1"]
    assert tasks.glue_label_map("STS-B") is None
    qqp = tasks.read_glue("qqp", GLUE / "QQP" / "train.tsv")
    assert len(qqp) == 3 and qqp.skipped == 1  # the row with 4 fields
    assert "train.tsv:4" in qqp.skip_reasons[0]
    mrpc = tasks.read_glue("mrpc", GLUE / "MRPC" / "train.tsv")  # starts with a BOM
    assert [e.label for e in mrpc] == ["1", "0", "1"]
    assert tasks.read_glue("mrpc", GLUE / "MRPC" / "test.tsv")[0].guid == "0"
    assert [e.label for e in tasks.read_glue("mnli", GLUE / "MNLI" / "dev_matched.tsv")] == [
        "neutral", "contradiction"]


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_glue_bad_input_names_file_line_and_field(tmp_path):
    head = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    bad_label = _write(tmp_path, "train.tsv", head + "1\t1\t2\tA b.\tC d.\n2\t3\t4\tE f.\tG h.\n")
    with pytest.raises(DataError, match=r"train.tsv:3: field 'Quality': '2' is not in the label "
                                         r"set \['0', '1'\]"):
        tasks.read_glue("mrpc", bad_label)
    short = _write(tmp_path, "short.tsv", head + "1\t1\t2\tonly one sentence\n")
    with pytest.raises(DataError, match=r"short.tsv:2: expected at least 5 tab-separated fields, "
                                        r"got 4"):
        tasks.read_glue("mrpc", short)
    empty = _write(tmp_path, "empty.tsv", "sentence\tlabel\n \t1\n")
    with pytest.raises(DataError, match=r"empty.tsv:2: field 'sentence' is empty"):
        tasks.read_glue("sst-2", empty)
    sts = _write(tmp_path, "sts.tsv", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2"
                 "\tsentence1\tsentence2\tscore\n0\tg\tf\ty\to\ts\ts\tA.\tB.\tfive\n")
    with pytest.raises(DataError, match=r"sts.tsv:2: field 'score': not a number: 'five'"):
        tasks.read_glue("sts-b", sts)
    with pytest.raises(DataError, match="header has no column 'question'"):
        tasks.read_glue("qnli", GLUE / "RTE" / "train.tsv")
    with pytest.raises(DataError, match="unknown GLUE task 'glue9'"):
        tasks.read_glue("glue9", bad_label)
    with pytest.raises(DataError, match="nothere.tsv: file not found"):
        tasks.read_glue("rte", tmp_path / "nothere.tsv")


# ----------------------------------------------------------------------------
# Generic CSV / JSONL


def test_generic_csv_and_jsonl(tmp_path):
    csv_path = _write(tmp_path, "d.csv", 'text,text_b,label\n"Hello, world",,pos\n'
                                         '"She said ""hi""",Second one,neg\n')
    rows = tasks.read_examples(csv_path)
    assert [(e.text_a, e.text_b, e.label) for e in rows] == [
        ("Hello, world", None, "pos"), ('She said "hi"', "Second one", "neg")]
    jsonl = _write(tmp_path, "d.jsonl", '{"text": "a b", "label": 1}\n\n'
                                        '{"text": "c", "text_b": "d", "label": 0, "id": 7}\n')
    rows = tasks.read_examples(jsonl)
    assert [(e.text_a, e.text_b, e.label, e.guid) for e in rows] == [
        ("a b", None, "1", "d.jsonl:1"), ("c", "d", "0", "7")]
    unlabelled = tasks.read_examples(_write(tmp_path, "u.jsonl", '{"text": "x"}\n'))
    assert unlabelled[0].label is None


def test_generic_bad_input(tmp_path, google):
    with pytest.raises(DataError, match=r"bad.jsonl:2: malformed JSON"):
        tasks.read_examples(_write(tmp_path, "bad.jsonl", '{"text": "a"}\n{"text": \n'))
    with pytest.raises(DataError, match=r"m.jsonl:1: missing field 'text'"):
        tasks.read_examples(_write(tmp_path, "m.jsonl", '{"sentences": "a"}\n'))
    with pytest.raises(DataError, match=r"e.csv:3: field 'text' is empty"):
        tasks.read_examples(_write(tmp_path, "e.csv", "text,label\nfine,1\n  ,0\n"))
    with pytest.raises(DataError, match=r"f.csv:2: expected 2 fields"):
        tasks.read_examples(_write(tmp_path, "f.csv", "text,label\na,1,extra\n"))
    rows = tasks.read_examples(_write(tmp_path, "l.csv", "text,label\ngood,pos\nbad,neutral\n"))
    with pytest.raises(DataError, match=r"example 1: field 'text_a' is empty"):
        tasks.featurize_classification([tasks.InputExample("ok"), tasks.InputExample(" ")], google)
    with pytest.raises(DataError, match=r"l.csv:3: field 'label': 'neutral' is not in the label "
                                        r"set \['neg', 'pos'\]"):
        tasks.featurize_classification(rows, google, label_map=LabelMap(["neg", "pos"]))


# ----------------------------------------------------------------------------
# Classification features


def _reference_features(examples, google, labels, max_seq_len):
    out = []
    for i, e in enumerate(examples):
        ref = classifier_data_lib.InputExample(guid=str(i), text_a=e.text_a, text_b=e.text_b,
                                               label=e.label)
        out.append(classifier_data_lib.convert_single_example(i, ref, labels, max_seq_len,
                                                              google.full))
    return out


@pytest.mark.parametrize("task,max_seq_len", [("mrpc", 128), ("mrpc", 24), ("rte", 20),
                                              ("sst-2", 9), ("mnli", 32), ("cola", 128)])
def test_classification_features_equal_google(google, task, max_seq_len):
    examples = tasks.read_glue(task, GLUE / FOLDERS[task] / "train.tsv")
    label_map = tasks.glue_label_map(task)
    feats = tasks.featurize_classification(examples, google, max_seq_len, label_map)
    ref = _reference_features(examples, google, label_map.labels, max_seq_len)
    np.testing.assert_array_equal(feats.inputs["token_ids"], [r.input_ids for r in ref])
    np.testing.assert_array_equal(feats.inputs["segment_ids"], [r.segment_ids for r in ref])
    np.testing.assert_array_equal(feats.inputs["padding_mask"], [r.input_mask for r in ref])
    np.testing.assert_array_equal(feats.labels, [r.label_id for r in ref])
    assert feats.inputs["token_ids"].dtype == np.int32
    np.testing.assert_array_equal(feats.lengths, feats.inputs["padding_mask"].sum(1))


def test_classification_on_real_rotten_tomatoes_with_the_project_tokenizer(google, vocab_file):
    from bert_keras.text.tokenizer import BertTokenizer

    texts, labels = samples.load_rotten_tomatoes()
    examples = [tasks.InputExample(t, None, str(l)) for t, l in zip(texts[:300], labels[:300])]
    ours = tasks.featurize_classification(examples, BertTokenizer.from_vocab(str(vocab_file)),
                                          64, LabelMap(["0", "1"]))
    ref = _reference_features(examples, google, ["0", "1"], 64)
    np.testing.assert_array_equal(ours.inputs["token_ids"], [r.input_ids for r in ref])
    np.testing.assert_array_equal(ours.labels, labels[:300])
    assert ours.truncated == sum(len(google.full.tokenize(t)) > 62 for t in texts[:300])


def test_stsb_regression_labels_are_float(google):
    examples = tasks.read_glue("sts-b", GLUE / "STS-B" / "train.tsv")
    feats = tasks.featurize_classification(examples, google, 32, regression=True)
    assert feats.labels.dtype == np.float32
    np.testing.assert_allclose(feats.labels, [5.0, 3.8, 3.8])
    assert tasks.featurize_classification(
        tasks.read_glue("sts-b", GLUE / "STS-B" / "test.tsv"), google, 32).labels is None


def test_to_dataset_pads_each_batch_to_its_longest(google):
    texts = ["short", "a much longer sentence than the other ones here", "mid length text",
             "x", "y z"]
    examples = [tasks.InputExample(t, None, str(i % 2)) for i, t in enumerate(texts)]
    feats = tasks.featurize_classification(examples, google, 64)
    batches = list(tasks.to_dataset(feats.inputs, feats.labels, batch_size=2).as_numpy_iterator())
    assert [b[0]["token_ids"].shape for b in batches] == [
        (2, feats.lengths[:2].max()), (2, feats.lengths[2:4].max()), (1, feats.lengths[4])]
    np.testing.assert_array_equal(batches[0][0]["token_ids"],
                                  feats.inputs["token_ids"][:2, :feats.lengths[:2].max()])
    np.testing.assert_array_equal(batches[0][1], feats.labels[:2])
    # shuffling with a seed is reproducible and keeps every example
    a = [b[1].tolist() for b in tasks.to_dataset(feats.inputs, feats.labels, 2, shuffle=True,
                                                 seed=3).as_numpy_iterator()]
    assert sorted(sum(a, [])) == sorted(feats.labels.tolist())


def test_bucketing_groups_similar_lengths_and_keeps_every_example(google):
    texts, labels = samples.load_rotten_tomatoes()
    examples = [tasks.InputExample(t, None, str(l)) for t, l in zip(texts[:640], labels[:640])]
    feats = tasks.featurize_classification(examples, google, 128, LabelMap(["0", "1"]))
    feats.labels = np.arange(640, dtype=np.int32)  # identify the examples

    def padding_ratio(ds):
        seen, padded, real = [], 0, 0
        for x, y in ds.as_numpy_iterator():
            seen.extend(y.tolist())
            padded += x["padding_mask"].size
            real += x["padding_mask"].sum()
            # trimmed rows are exactly the featurized rows, cut at the batch's longest
            np.testing.assert_array_equal(x["token_ids"],
                                          feats.inputs["token_ids"][y, :x["token_ids"].shape[1]])
        assert sorted(seen) == list(range(640))
        return padded / real

    plain = padding_ratio(tasks.to_dataset(feats.inputs, feats.labels, 32, shuffle=True, seed=1))
    bucketed = padding_ratio(tasks.to_dataset(feats.inputs, feats.labels, 32, shuffle=True,
                                              seed=1, bucket=8))
    assert bucketed < 1.2 < plain


# ----------------------------------------------------------------------------
# NER


def test_wnut16_parses_to_the_published_counts():
    sentences = tasks.read_conll(samples.fetch("wnut16"))
    assert len(sentences) == 2394
    assert sum(len(s.words) for s in sentences) == 46469
    tags = collections.Counter(t for s in sentences for t in s.tags)
    types = {t[2:] for t in tags if t != "O"}
    assert types == {"company", "facility", "geo-loc", "movie", "musicartist", "other", "person",
                     "product", "sportsteam", "tvshow"}
    assert sentences[0].words[:3] == ["@paulwalk", "It", "'s"]
    assert sentences[0].tags[14:17] == ["B-facility", "I-facility", "I-facility"]


def test_conll2003_format_skips_docstart_and_takes_the_last_column():
    sentences = tasks.read_conll(DATA / "conll2003" / "sample.txt")
    assert [s.words for s in sentences] == [
        ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
        ["Peter", "Blackburn"], ["BRUSSELS", "1996-08-22"]]
    assert sentences[0].tags == ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"]


def test_conll_bad_input(tmp_path):
    with pytest.raises(DataError, match=r"c.txt:3: expected 2 columns like the first token line, "
                                        r"got 3"):
        tasks.read_conll(_write(tmp_path, "c.txt", "a\tO\nb\tB-X\nc\tO\textra\n"))


def _reference_word_pieces(google, words):
    return [google.full.convert_tokens_to_ids(google.full.tokenize(w)) for w in words]


def test_token_labels_on_first_subtoken_only_and_back_to_words(google):
    sentences = tasks.read_conll(samples.fetch("wnut16"))[:300]
    label_map = LabelMap(sorted({t for s in sentences for t in s.tags}))
    feats = tasks.featurize_token_classification(sentences, google, label_map, max_seq_len=128)
    cls, sep = google.full.vocab["[CLS]"], google.full.vocab["[SEP]"]
    unk = google.full.vocab["[UNK]"]
    assert len(feats.sentence_index) == len(sentences)  # tweets fit in 128
    for row, sentence in enumerate(sentences):
        pieces = [p or [unk] for p in _reference_word_pieces(google, sentence.words)]
        expected_ids = [cls] + [i for p in pieces for i in p] + [sep]
        expected_labels = [IGNORE_LABEL] + [
            label_map.encode(t) if k == 0 else IGNORE_LABEL
            for p, t in zip(pieces, sentence.tags) for k in range(len(p))] + [IGNORE_LABEL]
        n = len(expected_ids)
        assert feats.inputs["token_ids"][row, :n].tolist() == expected_ids
        assert feats.labels[row, :n].tolist() == expected_labels
        assert (feats.labels[row, n:] == IGNORE_LABEL).all()
        assert feats.inputs["padding_mask"][row].sum() == n
    back = tasks.words_from_predictions(feats.labels, feats, label_map)
    assert back == [s.tags for s in sentences]


def test_token_features_with_the_project_tokenizer_equal_google(google, vocab_file):
    from bert_keras.text.tokenizer import BertTokenizer

    sentences = tasks.read_conll(samples.fetch("wnut16"))[:400]
    label_map = LabelMap(sorted({t for s in sentences for t in s.tags}))
    ours = tasks.featurize_token_classification(
        sentences, BertTokenizer.from_vocab(str(vocab_file)), label_map, max_seq_len=64)
    ref = tasks.featurize_token_classification(sentences, google, label_map, max_seq_len=64)
    np.testing.assert_array_equal(ours.inputs["token_ids"], ref.inputs["token_ids"])
    np.testing.assert_array_equal(ours.labels, ref.labels)


def test_long_sentences_are_split_into_windows_without_losing_words(google):
    sentences = tasks.read_conll(samples.fetch("wnut16"))[:50]
    label_map = LabelMap(sorted({t for s in sentences for t in s.tags}))
    feats = tasks.featurize_token_classification(sentences, google, label_map, max_seq_len=10)
    assert len(feats.sentence_index) > len(sentences)
    assert feats.inputs["padding_mask"].sum(1).max() <= 10
    back = tasks.words_from_predictions(feats.labels, feats, label_map)
    assert back == [s.tags for s in sentences]


def test_unknown_tag_is_an_error_naming_it(google):
    sentences = tasks.read_conll(DATA / "conll2003" / "sample.txt")
    with pytest.raises(DataError, match=r"sample.txt:3: field 'label': 'B-ORG' is not in the "
                                        r"label set"):
        tasks.featurize_token_classification(sentences, google, LabelMap(["O", "B-PER"]))


# ----------------------------------------------------------------------------
# SQuAD


def _dump(tmp_path, data, name="squad.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _long_squad(seed, n_paragraphs=3, v2=False):
    """Long contexts from real fixture text; answers anywhere, incl. window borders."""
    fixture = json.loads(samples.fetch("squad_tiny").read_text())
    words = fixture["data"][0]["paragraphs"][0]["context"].split()
    rng = random.Random(seed)
    articles = []
    qid = 0
    for _ in range(n_paragraphs):
        context_words = [rng.choice(words) for _ in range(rng.randint(40, 220))]
        context = " ".join(context_words)
        starts = [0]
        for w in context_words[:-1]:
            starts.append(starts[-1] + len(w) + 1)
        qas = []
        for _ in range(8):
            text = ""
            while not normalize_answer(text):  # answers like "the" score as no-answer
                i = rng.randrange(len(context_words))
                j = min(len(context_words) - 1, i + rng.randint(0, 4))
                text = " ".join(context_words[i:j + 1])
            qa = {"id": f"q{qid}", "question": " ".join(rng.choices(words, k=rng.randint(3, 30))),
                  "answers": [{"text": text, "answer_start": starts[i]}]}
            if v2:
                qa["is_impossible"] = rng.random() < 0.3
                if qa["is_impossible"]:
                    qa["answers"] = []
            qas.append(qa)
            qid += 1
        articles.append({"title": "t", "paragraphs": [{"context": context, "qas": qas}]})
    return {"data": articles, "version": "2.0" if v2 else "1.1"}


def _reference_squad_features(path, google, training, v2, max_seq_len, stride, max_query):
    examples = squad_lib.read_squad_examples(str(path), training, v2)
    features = []
    squad_lib.convert_examples_to_features(
        examples, google.full, max_seq_len, stride, max_query, training,
        lambda f, is_padding=False: features.append(f), batch_size=1)
    return examples, features


def _assert_same_features(ours, ref, google, training):
    assert len(ours) == len(ref)
    for i, r in enumerate(ref):
        assert ours.tokens[i] == google.full.convert_tokens_to_ids(r.tokens)
        n = len(r.tokens)
        assert ours.inputs["token_ids"][i].tolist() == r.input_ids
        assert ours.inputs["segment_ids"][i].tolist() == r.segment_ids
        assert ours.inputs["padding_mask"][i].tolist() == r.input_mask
        assert ours.token_to_orig_map[i] == r.token_to_orig_map
        assert ours.token_is_max_context[i] == r.token_is_max_context
        assert ours.example_index[i] == r.example_index
        assert ours.doc_span_index[i] == r.doc_span_index
        if training:
            assert (ours.start_positions[i], ours.end_positions[i]) == (
                r.start_position, r.end_position), i
        assert n <= len(r.input_ids)


@pytest.mark.parametrize("v2", [False, True])
@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("max_seq_len,stride,max_query", [(64, 16, 12), (128, 32, 64)])
def test_squad_windows_equal_google_on_long_contexts(tmp_path, google, v2, training, max_seq_len,
                                                     stride, max_query):
    data = _long_squad(seed=max_seq_len + training + 2 * v2, v2=v2)
    path = _dump(tmp_path, data)
    ref_examples, ref = _reference_squad_features(path, google, training, v2, max_seq_len,
                                                  stride, max_query)
    examples = tasks.read_squad(path, is_training=training, version="2.0" if v2 else "1.1")
    assert len(examples) == len(ref_examples)
    for e, r in zip(examples, ref_examples):
        assert (e.qas_id, e.doc_tokens) == (r.qas_id, r.doc_tokens)
        if training:
            assert (e.start_position, e.end_position, e.is_impossible) == (
                r.start_position, r.end_position, r.is_impossible)
    feats = tasks.featurize_squad(examples, google, max_seq_len, stride, max_query,
                                  is_training=training)
    _assert_same_features(feats, ref, google, training)
    if training:
        # some answers lie outside some windows -> [CLS]; some windows hold them
        assert (feats.start_positions == 0).any() and (feats.start_positions > 0).any()


def test_squad_fixture_windows_and_training_targets_equal_google(tmp_path, google):
    path = samples.fetch("squad_tiny")
    data = json.loads(path.read_text())
    # one answer per question, as a training file must have
    for qa in data["data"][0]["paragraphs"][0]["qas"]:
        qa["answers"] = qa["answers"][:1]
    path = _dump(tmp_path, data)
    ref_examples, ref = _reference_squad_features(path, google, True, False, 48, 20, 64)
    examples = tasks.read_squad(path, is_training=True)
    feats = tasks.featurize_squad(examples, google, 48, 20, 64, is_training=True)
    _assert_same_features(feats, ref, google, True)
    for e in examples:  # the training span is the answer text
        assert e.orig_answer_text in " ".join(e.doc_tokens[e.start_position:e.end_position + 1])


def test_squad_answer_not_in_context_is_skipped_and_counted(tmp_path, google):
    data = _long_squad(seed=5, n_paragraphs=1)
    qas = data["data"][0]["paragraphs"][0]["qas"]
    qas[0]["answers"][0]["text"] = "text that is nowhere"
    path = _dump(tmp_path, data)
    examples = tasks.read_squad(path, is_training=True)
    ref = squad_lib.read_squad_examples(str(path), True, False)
    assert [e.qas_id for e in examples] == [r.qas_id for r in ref] == [q["id"] for q in qas[1:]]
    assert examples.skipped == 1
    assert "q0" in examples.skip_reasons[0] and "not found" in examples.skip_reasons[0]
    # an offset past the context (the reference crashes on it) is skipped too
    qas[1]["answers"][0]["answer_start"] = 10 ** 6
    examples = tasks.read_squad(_dump(tmp_path, data, "b.json"), is_training=True)
    assert examples.skipped == 2 and len(examples) == len(qas) - 2
    # evaluation reading keeps every question
    assert len(tasks.read_squad(path)) == len(qas)


def test_squad_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": [\n{"paragraphs": }\n]}')
    with pytest.raises(DataError, match=r"bad.json:2: malformed JSON"):
        tasks.read_squad(bad)
    data = {"data": [{"paragraphs": [{"context": "a b", "qas": [{"id": "x", "answers": []}]}]}]}
    with pytest.raises(DataError, match=r"data\[0\].paragraphs\[0\].qas\[0\]: missing field "
                                        r"'question'"):
        tasks.read_squad(_dump(tmp_path, data))
    data["data"][0]["paragraphs"][0]["qas"][0].update(question="q?", answers=[
        {"text": "a", "answer_start": 0}, {"text": "b", "answer_start": 2}])
    with pytest.raises(DataError, match="exactly 1 answer, got 2"):
        tasks.read_squad(_dump(tmp_path, data), is_training=True)
    assert tasks.read_squad(data, is_training=True, first_answer_only=True)[0].start_position == 0


def _reference_postprocess(ref_examples, ref_features, starts, ends, v2, threshold):
    RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
    results = [RawResult(f.unique_id, s.tolist(), e.tolist())
               for f, s, e in zip(ref_features, starts, ends)]
    return squad_lib.postprocess_output(ref_examples, ref_features, results, 20, 30, True,
                                        version_2_with_negative=v2,
                                        null_score_diff_threshold=threshold)


@pytest.mark.parametrize("v2,threshold", [(False, 0.0), (True, 0.0), (True, -2.0), (True, 3.0)])
def test_squad_postprocessing_equals_google(tmp_path, google, v2, threshold):
    data = _long_squad(seed=11, v2=v2)
    path = _dump(tmp_path, data)
    ref_examples, ref = _reference_squad_features(path, google, False, v2, 64, 16, 12)
    examples = tasks.read_squad(path, version="2.0" if v2 else "1.1")
    feats = tasks.featurize_squad(examples, google, 64, 16, 12)
    rng = np.random.default_rng(0)
    starts = rng.normal(size=(len(feats), 64)) * 3
    ends = rng.normal(size=(len(feats), 64)) * 3
    # [CLS] logits high enough that some questions come out unanswerable
    starts[:, 0] += 9 + rng.normal(size=len(feats)) * 3
    ends[:, 0] += 9 + rng.normal(size=len(feats)) * 3
    ours = tasks.postprocess_squad(examples, feats, starts, ends, version_2=v2,
                                   null_score_diff_threshold=threshold, vocab=google.vocab)
    answers, nbest, diffs = _reference_postprocess(ref_examples, ref, starts, ends, v2, threshold)
    assert ours.answers == dict(answers)
    for qid, entries in nbest.items():
        assert [e["text"] for e in ours.nbest[qid]] == [e["text"] for e in entries]
        np.testing.assert_allclose([e["probability"] for e in ours.nbest[qid]],
                                   [e["probability"] for e in entries], rtol=1e-9)
    if v2:
        assert ours.null_score_diff == pytest.approx(dict(diffs))
        if threshold == 0.0:  # the logits give both kinds of answer
            assert any(a == "" for a in ours.answers.values())
            assert any(a != "" for a in ours.answers.values())
        # the threshold search reuses best_non_null + null_score_diff
        again = tasks.apply_null_threshold(ours, threshold)
        assert again == ours.answers


def test_squad_v2_null_threshold_chosen_on_the_evaluation_set(tmp_path, google):
    data = _long_squad(seed=21, n_paragraphs=4, v2=True)
    examples = tasks.read_squad(data, version="2.0")
    feats = tasks.featurize_squad(examples, google, 64, 16, 12)
    rng = np.random.default_rng(1)
    starts = rng.normal(size=(len(feats), 64)) * 3
    ends = rng.normal(size=(len(feats), 64)) * 3
    starts[:, 0] += 9 + rng.normal(size=len(feats)) * 3
    preds = tasks.postprocess_squad(examples, feats, starts, ends, version_2=True,
                                    vocab=google.vocab)
    sweep = squad_evaluate(data, preds.best_non_null, "2.0", na_probs=preds.null_score_diff)
    answers = tasks.apply_null_threshold(preds, sweep["best_f1_thresh"])
    assert squad_evaluate(data, answers, "2.0")["f1"] == pytest.approx(sweep["best_f1"])
    # and the same threshold given to postprocess_squad gives the same answers
    again = tasks.postprocess_squad(examples, feats, starts, ends, version_2=True,
                                    null_score_diff_threshold=sweep["best_f1_thresh"],
                                    vocab=google.vocab)
    assert again.answers == answers


def test_squad_end_to_end_on_the_fixture_with_gold_logits(google):
    path = samples.fetch("squad_tiny")
    data = json.loads(path.read_text())
    train = tasks.read_squad(path, is_training=True, first_answer_only=True)
    feats = tasks.featurize_squad(train, google, max_seq_len=64, doc_stride=24,
                                  is_training=True)
    # logits that point at the featurized targets must decode to the gold answers
    starts = np.full((len(feats), 64), -10.0)
    ends = np.full((len(feats), 64), -10.0)
    starts[np.arange(len(feats)), feats.start_positions] = 10.0
    ends[np.arange(len(feats)), feats.end_positions] = 10.0
    eval_examples = tasks.read_squad(path)
    eval_feats = tasks.featurize_squad(eval_examples, google, max_seq_len=64, doc_stride=24)
    preds = tasks.postprocess_squad(eval_examples, eval_feats, starts, ends, vocab=google.vocab)
    scores = squad_evaluate(data, preds.answers)
    assert scores == {"exact_match": 100.0, "f1": 100.0}
    # trimmed logits (a batch padded to its longest row) decode the same
    width = int(eval_feats.inputs["padding_mask"].sum(1).max())
    trimmed = tasks.postprocess_squad(eval_examples, eval_feats, starts[:, :width],
                                      ends[:, :width], vocab=google.vocab)
    assert trimmed.answers == preds.answers


TEXTS = ["Steve Smith's", "Héllo, Wörld!", "naïve café (1895–1943).", "東京 is big",
         "a\u0000b\u200bc\tdef", "  spaced   out  ", "ÅNGSTRÖM’S “quote”", "e.g. U.S.A.",
         "İstanbul", "ﬁne", "x—y", "$5.00 & 10%"]


def test_basic_tokenizer_and_final_text_equal_google():
    basic = tokenization.BasicTokenizer(do_lower_case=True)
    for text in TEXTS:
        assert tasks.basic_tokenize(text) == basic.tokenize(text), text
    for lower in (True, False):
        for text in TEXTS:
            toks = tokenization.BasicTokenizer(do_lower_case=lower).tokenize(text)
            for i in range(len(toks)):
                for j in range(i, min(len(toks), i + 3)):
                    pred = " ".join(toks[i:j + 1])
                    assert tasks.get_final_text(pred, text, lower) == squad_lib.get_final_text(
                        pred, text, lower), (pred, text)
    assert tasks.get_final_text("steve smith", "Steve Smith's") == "Steve Smith"


# ----------------------------------------------------------------------------
# SWAG


def test_swag_reader_and_pairs_equal_google_packing(google):
    examples = tasks.read_swag(DATA / "swag" / "train.csv")
    assert len(examples) == 3 and [e.label for e in examples] == [0, 1, 2]
    assert examples[0].endings[0] == "passes by walking down the street playing their instruments."
    feats = tasks.featurize_multiple_choice(examples, google, max_seq_len=24)
    assert feats.inputs["token_ids"].shape == (3, 4, 24)
    np.testing.assert_array_equal(feats.labels, [0, 1, 2])
    for i, e in enumerate(examples):
        pairs = [classifier_data_lib.InputExample(str(j), e.context, f"{e.start} {ending}", "0")
                 for j, ending in enumerate(e.endings)]
        ref = [classifier_data_lib.convert_single_example(0, p, ["0"], 24, google.full)
               for p in pairs]
        np.testing.assert_array_equal(feats.inputs["token_ids"][i], [r.input_ids for r in ref])
        np.testing.assert_array_equal(feats.inputs["segment_ids"][i], [r.segment_ids for r in ref])
    batch = next(iter(tasks.to_dataset(feats.inputs, feats.labels, batch_size=3)))
    assert batch[0]["token_ids"].shape[:2] == (3, 4)
    assert batch[0]["token_ids"].shape[2] == feats.lengths.max()


def test_swag_bad_label(tmp_path):
    path = _write(tmp_path, "s.csv", "sent1,sent2,ending0,ending1,ending2,ending3,label\n"
                                     "A.,B,c,d,e,f,4\n")
    with pytest.raises(DataError, match=r"s.csv:2: field 'label': '4' is not an ending index"):
        tasks.read_swag(path)
