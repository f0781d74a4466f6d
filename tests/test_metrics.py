"""Metrics equal their references: sklearn, scipy, seqeval and the official SQuAD scripts."""

import json
import random

import numpy as np
import pytest
import scipy.stats
import seqeval.metrics
import sklearn.metrics

from bert_keras import metrics, samples
from bert_keras.errors import DataError
from tests.conftest import tf_models

squad_evaluate_v1_1 = tf_models("official.nlp.tools.squad_evaluate_v1_1")
squad_evaluate_v2_0 = tf_models("official.nlp.tools.squad_evaluate_v2_0")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _random_labels(rng, n, k):
    return rng.integers(0, k, n), rng.integers(0, k, n)


def test_classification_metrics_equal_sklearn_on_random_sets():
    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(1, 60))
        k = int(rng.integers(2, 6))
        y, p = _random_labels(rng, n, k)
        if trial % 7 == 0:
            p = y.copy()  # perfect
        if trial % 11 == 0:
            p = np.zeros_like(y)  # constant prediction: MCC undefined -> 0
        assert metrics.accuracy(y, p) == pytest.approx(sklearn.metrics.accuracy_score(y, p))
        assert metrics.matthews_corrcoef(y, p) == pytest.approx(
            sklearn.metrics.matthews_corrcoef(y, p), abs=1e-12)
        assert metrics.f1_score(y, p, average="macro") == pytest.approx(
            sklearn.metrics.f1_score(y, p, average="macro", zero_division=0))
        assert metrics.f1_score(y, p, average="micro") == pytest.approx(
            sklearn.metrics.f1_score(y, p, average="micro", zero_division=0))
        yb, pb = (y % 2), (p % 2)
        assert metrics.f1_score(yb, pb) == pytest.approx(
            sklearn.metrics.f1_score(yb, pb, zero_division=0))
        assert metrics.matthews_corrcoef(yb, pb) == pytest.approx(
            sklearn.metrics.matthews_corrcoef(yb, pb), abs=1e-12)


def test_classification_metrics_are_percentages():
    result = metrics.classification_metrics([1, 0, 1, 1], [1, 1, 1, 0])
    assert result["accuracy"] == 50.0
    assert result["f1"] == pytest.approx(100 * sklearn.metrics.f1_score([1, 0, 1, 1], [1, 1, 1, 0]))
    assert "f1" not in metrics.classification_metrics([0, 1, 2], [0, 2, 2])


def test_mismatched_lengths_are_an_error():
    with pytest.raises(DataError, match="differ in length: 3 != 2"):
        metrics.accuracy([1, 0, 1], [1, 0])


def test_correlations_equal_scipy_including_ties():
    rng = np.random.default_rng(1)
    for trial in range(200):
        n = int(rng.integers(3, 80))
        x = rng.normal(size=n)
        y = 0.5 * x + rng.normal(size=n)
        if trial % 3 == 0:  # STS-B style scores with many ties
            x = np.round(rng.uniform(0, 5, n) * 5) / 5
            y = np.round(x + rng.normal(scale=1.0, size=n))
        assert metrics.pearson(x, y) == pytest.approx(scipy.stats.pearsonr(x, y)[0], abs=1e-10)
        assert metrics.spearman(x, y) == pytest.approx(
            scipy.stats.spearmanr(x, y)[0], abs=1e-10)
        assert np.array_equal(metrics.rankdata(x), scipy.stats.rankdata(x))
    assert np.isnan(metrics.pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
    r = metrics.regression_metrics([0.0, 1.0, 2.0], [0.0, 1.0, 2.5])
    assert r["pearson"] == pytest.approx(100 * scipy.stats.pearsonr([0, 1, 2], [0, 1, 2.5])[0])
    assert r["mse"] == pytest.approx(0.25 / 3)


# ----------------------------------------------------------------------------
# Entities


def _seqeval(true, pred):
    return (seqeval.metrics.precision_score(true, pred), seqeval.metrics.recall_score(true, pred),
            seqeval.metrics.f1_score(true, pred))


def _random_tags(rng, n, types, tags=("B", "I")):
    out = []
    for _ in range(n):
        r = rng.random()
        out.append("O" if r < 0.4 else f"{rng.choice(tags)}-{rng.choice(types)}")
    return out


def test_entity_scores_equal_seqeval_on_random_tag_sequences():
    rng = random.Random(0)
    types = ["PER", "LOC", "ORG"]
    for trial in range(400):
        sentences = rng.randint(1, 6)
        true, pred = [], []
        for _ in range(sentences):
            n = rng.randint(0, 12)
            scheme = ("B", "I", "E", "S") if trial % 5 == 0 else ("B", "I")
            true.append(_random_tags(rng, n, types, scheme))
            if trial % 4 == 0:
                # small edits of the truth: the realistic case
                p = list(true[-1])
                for i in range(len(p)):
                    if rng.random() < 0.2:
                        p[i] = rng.choice(["O", "B-PER", "I-PER", "I-LOC", "B-ORG"])
                pred.append(p)
            else:
                pred.append(_random_tags(rng, n, types, scheme))
        ours = metrics.entity_scores(true, pred)
        ref = _seqeval(true, pred)
        assert (ours["precision"], ours["recall"], ours["f1"]) == pytest.approx(ref), (true, pred)
        for s in true + pred:
            assert metrics.get_entities(s) == seqeval.metrics.sequence_labeling.get_entities(s)


def test_entity_chunking_rules():
    # I- after O starts an entity; a type change splits; B-B are two entities
    assert metrics.get_entities(["I-PER", "I-PER", "O", "B-LOC", "I-ORG", "B-LOC", "B-LOC"]) == [
        ("PER", 0, 1), ("LOC", 3, 3), ("ORG", 4, 4), ("LOC", 5, 5), ("LOC", 6, 6)]
    # sentences are joined with an O, so an entity never crosses them
    assert metrics.get_entities([["B-PER"], ["I-PER"]]) == [("PER", 0, 0), ("PER", 2, 2)]


def test_entity_scores_equal_seqeval_on_real_wnut16_tags():
    from bert_keras.tasks import read_conll

    sentences = read_conll(samples.fetch("wnut16"))
    true = [s.tags for s in sentences]
    rng = random.Random(1)
    labels = sorted({t for s in true for t in s})
    for noise in (0.0, 0.02, 0.1, 0.3):
        pred = [[rng.choice(labels) if rng.random() < noise else t for t in s] for s in true]
        ours = metrics.entity_scores(true, pred)
        ref = _seqeval(true, pred)
        assert (ours["precision"], ours["recall"], ours["f1"]) == pytest.approx(ref, abs=1e-12)
    gold = metrics.entity_scores(true, true)
    assert gold["f1"] == 1.0
    assert gold["num_true"] == len(seqeval.metrics.sequence_labeling.get_entities(true))
    ner = metrics.ner_metrics(true, true)
    assert ner["f1"] == 100.0 and ner["accuracy"] == 100.0


# ----------------------------------------------------------------------------
# SQuAD

WORDS = ("the a an river Paris Denver Broncos 1.5 million , . ' won Super Bowl 50 in "
         "February of Santa Clara California Levi's Stadium").split()


def _generated_squad(rng, n_questions, unanswerable):
    qas = []
    for q in range(n_questions):
        if rng.random() < unanswerable:
            answers = []
        else:
            answers = [{"text": " ".join(rng.choices(WORDS, k=rng.randint(1, 5))),
                        "answer_start": 0} for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.1:
                answers.append({"text": "the", "answer_start": 0})  # normalises to empty
        qas.append({"id": f"q{q}", "question": "?", "answers": answers})
    return [{"title": "t", "paragraphs": [{"context": " ".join(WORDS), "qas": qas}]}]


def _perturb(rng, text):
    choice = rng.random()
    if choice < 0.2:
        return text
    if choice < 0.35:
        return "The " + text.upper() + "!"
    if choice < 0.5:
        words = text.split()
        return " ".join(words[:-1]) if len(words) > 1 else text + " extra"
    if choice < 0.6:
        return ""
    if choice < 0.7:
        return "  ".join(text.split()) + " ."
    return " ".join(rng.choices(WORDS, k=rng.randint(1, 6)))


def _predictions(rng, data, drop=0.0):
    preds = {}
    for qa in data[0]["paragraphs"][0]["qas"]:
        if rng.random() < drop:
            continue
        gold = rng.choice(qa["answers"])["text"] if qa["answers"] else ""
        preds[qa["id"]] = _perturb(rng, gold)
    return preds


def test_squad_v1_equals_official_on_generated_predictions():
    rng = random.Random(0)
    for trial in range(60):
        data = _generated_squad(rng, rng.randint(1, 40), unanswerable=0.0)
        preds = _predictions(rng, data, drop=0.1 if trial % 3 == 0 else 0.0)
        ours = metrics.squad_evaluate(data, preds, version="1.1")
        ref = squad_evaluate_v1_1.evaluate(data, preds)
        assert set(ours) == {"exact_match", "f1"}
        assert ours["exact_match"] == pytest.approx(100 * ref["exact_match"], abs=1e-9)
        assert ours["f1"] == pytest.approx(100 * ref["final_f1"], abs=1e-9)


def test_squad_v2_equals_official_on_generated_predictions():
    rng = random.Random(1)
    for trial in range(80):
        data = _generated_squad(rng, rng.randint(1, 40), unanswerable=rng.choice([0.0, 0.3, 1.0]))
        preds = _predictions(rng, data, drop=0.1 if trial % 4 == 0 else 0.0)
        if not preds:
            continue
        na_probs = None
        if trial % 2:
            # ties on purpose: the threshold sweep must group them like the script
            na_probs = {q: round(rng.random(), 1) for q in preds}
        thresh = rng.choice([1.0, 0.5])
        ours = metrics.squad_evaluate({"data": data}, preds, version="2.0",
                                      na_probs=na_probs, na_prob_thresh=thresh)
        ref_probs = na_probs if na_probs is not None else {q: 0.0 for q in preds}
        if thresh == 1.0:
            ref = squad_evaluate_v2_0.evaluate(data, preds, na_probs)
        else:
            ref = _reference_v2_with_threshold(data, preds, ref_probs, thresh)
        renamed = {"final_exact": "best_exact", "final_exact_thresh": "best_exact_thresh",
                   "final_f1": "best_f1", "final_f1_thresh": "best_f1_thresh"}
        expected = {renamed.get(k, k): v for k, v in ref.items()}
        if na_probs is None:
            expected = {k: v for k, v in expected.items() if not k.startswith("pr_")}
        assert set(ours) == set(expected)
        for key, value in expected.items():
            assert ours[key] == pytest.approx(value, abs=1e-9), key


def _reference_v2_with_threshold(data, preds, na_probs, thresh):
    # The official script's main() with --na-prob-thresh, built from its own functions.
    m = squad_evaluate_v2_0
    has_ans = m._make_qid_to_has_ans(
        [{"paragraphs": [{"qas": [qa]}]} for qa in data[0]["paragraphs"][0]["qas"]
         if qa["id"] in preds])
    exact_raw, f1_raw = m._get_raw_scores(data, preds)
    exact_t = m._apply_no_ans_threshold(exact_raw, na_probs, has_ans, thresh)
    f1_t = m._apply_no_ans_threshold(f1_raw, na_probs, has_ans, thresh)
    out = m._make_eval_dict(exact_t, f1_t)
    for prefix, want in (("HasAns", True), ("NoAns", False)):
        qids = [k for k, v in has_ans.items() if v == want]
        if qids:
            m._merge_eval(out, m._make_eval_dict(exact_t, f1_t, qid_list=qids), prefix)
    m._find_all_best_thresh(out, preds, exact_raw, f1_raw, na_probs, has_ans)
    m._run_precision_recall_analysis(out, exact_raw, f1_raw, na_probs, has_ans)
    return out


def test_squad_v1_on_the_real_fixture():
    data = json.loads(samples.fetch("squad_tiny").read_text())
    qas = [qa for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]]
    perfect = {qa["id"]: qa["answers"][0]["text"] for qa in qas}
    assert metrics.squad_evaluate(data, perfect) == {"exact_match": 100.0, "f1": 100.0}
    half = dict(perfect)
    half[qas[0]["id"]] = "something else entirely"
    ours = metrics.squad_evaluate(data, half)
    ref = squad_evaluate_v1_1.evaluate(data["data"], half)
    assert ours["exact_match"] == pytest.approx(100 * ref["exact_match"])
    assert ours["f1"] == pytest.approx(100 * ref["final_f1"])


def test_squad_bad_input():
    with pytest.raises(DataError, match="version"):
        metrics.squad_evaluate([], {}, version="3")
    with pytest.raises(DataError, match="no value for question id 'q0'"):
        data = _generated_squad(random.Random(0), 2, 0.0)
        metrics.squad_evaluate(data, {"q0": "x", "q1": "y"}, version="2.0", na_probs={"q1": 0.1})
