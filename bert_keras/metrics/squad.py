"""SQuAD v1.1 / v2.0 scores, equal to the official evaluation scripts."""

from __future__ import annotations

import collections
import re
import string

from bert_keras.errors import DataError


def normalize_answer(text):
    """The official SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    exclude = set(string.punctuation)
    text = "".join(ch for ch in text if ch not in exclude)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _token_f1(gold, pred, empty_agreement):
    gold_toks = normalize_answer(gold).split()
    pred_toks = normalize_answer(pred).split()
    if empty_agreement and (not gold_toks or not pred_toks):
        # v2.0: an empty answer (no-answer) scores 1 only against an empty answer.
        return float(gold_toks == pred_toks)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_toks)
    recall = same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset):
    if isinstance(dataset, dict):
        if "data" not in dataset:
            raise DataError("SQuAD dataset: missing field 'data'")
        dataset = dataset["data"]
    try:
        for article in dataset:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    yield qa
    except (KeyError, TypeError) as e:
        raise DataError(f"SQuAD dataset: malformed article/paragraph/qas structure ({e})") from None


def squad_evaluate(dataset, predictions, version="1.1", na_probs=None, na_prob_thresh=1.0):
    """Scores SQuAD predictions exactly like the official evaluation scripts.

    Args:
      dataset: the SQuAD JSON (a dict with "data") or its "data" list.
      predictions: {question id: answer text}; "" means no answer (v2.0).
      version: "1.1" or "2.0".
      na_probs: v2.0 only: {question id: probability of no answer}; default 0.0
        for every prediction.
      na_prob_thresh: v2.0: a question whose na_prob is above this is scored
        as predicted unanswerable.

    Returns:
      v1.1: {"exact_match", "f1"} in percent; every question of the dataset
        counts (an unanswered one scores 0).
      v2.0: {"exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
        "NoAns_exact", "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh",
        "best_f1", "best_f1_thresh"} in percent (thresholds are na_prob values),
        plus "pr_exact_ap", "pr_f1_ap", "pr_oracle_ap" when na_probs is given.
        As in tf-models-official, only questions with a prediction count
        (HasAns_/NoAns_ keys appear only when such questions exist).
    """
    version = str(version)
    if version in ("1.1", "1", "v1.1"):
        return _squad_v1(dataset, predictions)
    if version in ("2.0", "2", "v2.0"):
        return _squad_v2(dataset, predictions, na_probs, na_prob_thresh)
    raise DataError(f"SQuAD version must be '1.1' or '2.0', got {version!r}")


def _squad_v1(dataset, predictions):
    exact = f1 = 0.0
    total = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            continue
        golds = [a["text"] for a in qa["answers"]]
        if not golds:
            raise DataError(f"SQuAD v1.1 question {qa['id']!r}: field 'answers' is empty "
                            f"(use version='2.0' for unanswerable questions)")
        pred = predictions[qa["id"]]
        exact += max(float(normalize_answer(pred) == normalize_answer(g)) for g in golds)
        f1 += max(_token_f1(g, pred, empty_agreement=False) for g in golds)
    if not total:
        raise DataError("SQuAD dataset has no questions")
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def _squad_v2(dataset, predictions, na_probs, na_prob_thresh):
    has_ans = {}
    exact_raw = {}
    f1_raw = {}
    for qa in _questions(dataset):
        qid = qa["id"]
        if qid not in predictions:
            continue
        has_ans[qid] = bool(qa["answers"])
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        pred = predictions[qid]
        exact_raw[qid] = max(int(normalize_answer(g) == normalize_answer(pred)) for g in golds)
        f1_raw[qid] = max(_token_f1(g, pred, empty_agreement=True) for g in golds)
    if not exact_raw:
        raise DataError("no prediction matches a question id of the SQuAD dataset")
    given_na_probs = na_probs is not None
    if na_probs is None:
        na_probs = {k: 0.0 for k in predictions}
    missing = [q for q in exact_raw if q not in na_probs]
    if missing:
        raise DataError(f"na_probs: no value for question id {missing[0]!r}")

    def thresholded(scores):
        return {q: float(not has_ans[q]) if na_probs[q] > na_prob_thresh else s
                for q, s in scores.items()}

    exact_t, f1_t = thresholded(exact_raw), thresholded(f1_raw)

    def summary(qids):
        n = len(qids)
        return {"exact": 100.0 * sum(exact_t[q] for q in qids) / n,
                "f1": 100.0 * sum(f1_t[q] for q in qids) / n, "total": n}

    result = summary(list(exact_t))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [q for q, v in has_ans.items() if v == wanted]
        if qids:
            result.update({f"{prefix}_{k}": v for k, v in summary(qids).items()})

    ordered = sorted(na_probs, key=lambda k: na_probs[k])
    for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
        # Sweep the threshold upward: each question moved from "no answer" to
        # "answered" gains its score (answerable) or loses 1 if the model
        # answered an unanswerable one.
        score = best = sum(1 for v in has_ans.values() if not v)
        best_thresh = 0.0
        for qid in ordered:
            if qid not in raw:
                continue
            if has_ans[qid]:
                score += raw[qid]
            elif predictions[qid]:
                score -= 1
            if score > best:
                best, best_thresh = score, na_probs[qid]
        result[f"best_{name}"] = 100.0 * best / len(raw)
        result[f"best_{name}_thresh"] = best_thresh

    num_true_pos = sum(1 for v in has_ans.values() if v)
    if given_na_probs and num_true_pos:
        oracle = {q: float(v) for q, v in has_ans.items()}
        for name, raw in (("exact", exact_raw), ("f1", f1_raw), ("oracle", oracle)):
            result[f"pr_{name}_ap"] = _average_precision(raw, na_probs, num_true_pos, has_ans)
    return result


def _average_precision(scores, na_probs, num_true_pos, has_ans):
    # Ranks questions by confidence of having an answer; only questions that
    # are scored take part (the official script assumes na_probs covers them).
    qids = sorted((q for q in na_probs if q in has_ans), key=lambda k: na_probs[k])
    true_pos = 0.0
    last_recall = 0.0
    ap = 0.0
    for i, qid in enumerate(qids):
        if has_ans[qid]:
            true_pos += scores[qid]
        precision = true_pos / (i + 1)
        recall = true_pos / num_true_pos
        if i == len(qids) - 1 or na_probs[qid] != na_probs[qids[i + 1]]:
            ap += precision * (recall - last_recall)
            last_recall = recall
    return 100.0 * ap
