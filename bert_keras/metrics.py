"""Evaluation metrics for fine-tuning, equal to the reference implementations.

Pure Python/numpy, no scipy or sklearn at runtime; the tests compare every
function with the reference it mirrors:

| function | reference |
| --- | --- |
| `accuracy`, `f1_score`, `matthews_corrcoef` | sklearn.metrics (same names) |
| `pearson`, `spearman` | scipy.stats.pearsonr / spearmanr |
| `get_entities`, `entity_scores` | seqeval.metrics (default mode, conlleval-style chunking) |
| `squad_evaluate` | the official SQuAD v1.1 / v2.0 evaluation scripts (as in tf-models-official) |

The scalar functions return fractions in [0, 1] like sklearn; the `*_metrics`
helpers and `squad_evaluate` return dicts of percentages, the form written
to `eval_results.json`.

    from bert_keras import metrics
    metrics.classification_metrics([1, 0, 1], [1, 1, 1])
    # {'accuracy': 66.66..., 'f1': 80.0, 'macro_f1': 40.0, 'mcc': 0.0}
    metrics.entity_scores([["B-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]])["f1"]  # 1.0
"""

from __future__ import annotations

import collections
import math
import re
import string

import numpy as np

from bert_keras.errors import DataError

# ----------------------------------------------------------------------------
# Classification and regression


def _as_1d(values, name):
    array = np.asarray(values)
    if array.ndim != 1:
        raise DataError(f"{name}: expected a 1-D sequence, got shape {array.shape}")
    return array


def _pair(labels, predictions):
    y_true = _as_1d(labels, "labels")
    y_pred = _as_1d(predictions, "predictions")
    if y_true.shape != y_pred.shape:
        raise DataError(f"labels and predictions differ in length: "
                        f"{len(y_true)} != {len(y_pred)}")
    if not len(y_true):
        raise DataError("labels and predictions are empty")
    return y_true, y_pred


def accuracy(labels, predictions):
    """Fraction of equal entries.  labels, predictions: 1-D sequences of class ids."""
    y_true, y_pred = _pair(labels, predictions)
    return float(np.mean(y_true == y_pred))


def _confusion(y_true, y_pred):
    classes = np.unique(np.concatenate([y_true, y_pred]))
    index = {c: i for i, c in enumerate(classes.tolist())}
    matrix = np.zeros((len(classes), len(classes)), dtype=np.int64)
    for t, p in zip(y_true.tolist(), y_pred.tolist()):
        matrix[index[t], index[p]] += 1
    return classes, matrix


def _f1_from_counts(tp, fp, fn):
    # sklearn's zero_division=0: an undefined precision/recall/F1 counts as 0.
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def f1_score(labels, predictions, average="binary", pos_label=1):
    """F1 like `sklearn.metrics.f1_score(..., zero_division=0)`.

    Args:
      labels, predictions: 1-D sequences of class ids.
      average: "binary" (F1 of `pos_label`), "macro" (unweighted mean over the
        classes present in labels or predictions) or "micro".
    Returns:
      float in [0, 1].
    """
    y_true, y_pred = _pair(labels, predictions)
    if average == "binary":
        tp = int(np.sum((y_true == pos_label) & (y_pred == pos_label)))
        fp = int(np.sum((y_true != pos_label) & (y_pred == pos_label)))
        fn = int(np.sum((y_true == pos_label) & (y_pred != pos_label)))
        return float(_f1_from_counts(tp, fp, fn))
    classes, matrix = _confusion(y_true, y_pred)
    tp = np.diag(matrix)
    fp = matrix.sum(axis=0) - tp
    fn = matrix.sum(axis=1) - tp
    if average == "micro":
        return float(_f1_from_counts(tp.sum(), fp.sum(), fn.sum()))
    if average == "macro":
        return float(np.mean([_f1_from_counts(*c) for c in zip(tp, fp, fn)]))
    raise ValueError(f"average must be 'binary', 'macro' or 'micro', got {average!r}")


def matthews_corrcoef(labels, predictions):
    """Matthews correlation coefficient (multi-class form, as sklearn), in [-1, 1].

    0.0 when it is undefined (all labels or all predictions one class).
    """
    y_true, y_pred = _pair(labels, predictions)
    _, matrix = _confusion(y_true, y_pred)
    # Python ints: the products overflow int64 for large sets.
    t_sum = [int(v) for v in matrix.sum(axis=1)]
    p_sum = [int(v) for v in matrix.sum(axis=0)]
    n_correct = int(np.trace(matrix))
    n = int(matrix.sum())
    cov_tp = n_correct * n - sum(t * p for t, p in zip(t_sum, p_sum))
    cov_pp = n * n - sum(p * p for p in p_sum)
    cov_tt = n * n - sum(t * t for t in t_sum)
    if cov_pp * cov_tt == 0:
        return 0.0
    return float(cov_tp / math.sqrt(cov_tt * cov_pp))


def pearson(x, y):
    """Pearson correlation of two 1-D float sequences (nan if one is constant)."""
    a, b = _pair(x, y)
    a = a.astype(np.float64) - np.mean(a, dtype=np.float64)
    b = b.astype(np.float64) - np.mean(b, dtype=np.float64)
    denom = math.sqrt(float(np.dot(a, a)) * float(np.dot(b, b)))
    if denom == 0.0:
        return float("nan")
    return float(max(-1.0, min(1.0, float(np.dot(a, b)) / denom)))


def rankdata(values):
    """Ranks starting at 1, ties get their average rank (scipy's "average" method)."""
    values = np.asarray(values)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    sorted_values = values[order]
    start = 0
    n = len(values)
    while start < n:
        end = start
        while end + 1 < n and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def spearman(x, y):
    """Spearman rank correlation: Pearson of the average ranks."""
    a, b = _pair(x, y)
    return pearson(rankdata(a), rankdata(b))


def classification_metrics(labels, predictions):
    """Percentages for `eval_results.json`: accuracy, f1 (binary sets only), macro_f1, mcc.

    `mcc` stays in [-100, 100] (x100 like the others).
    """
    y_true, y_pred = _pair(labels, predictions)
    result = {"accuracy": 100.0 * accuracy(y_true, y_pred)}
    if set(np.unique(np.concatenate([y_true, y_pred])).tolist()) <= {0, 1}:
        result["f1"] = 100.0 * f1_score(y_true, y_pred)
    result["macro_f1"] = 100.0 * f1_score(y_true, y_pred, average="macro")
    result["mcc"] = 100.0 * matthews_corrcoef(y_true, y_pred)
    return result


def regression_metrics(labels, predictions):
    """Percentages for `eval_results.json`: pearson, spearman (x100) and the plain mse."""
    a, b = _pair(labels, predictions)
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return {"pearson": 100.0 * pearson(a, b), "spearman": 100.0 * spearman(a, b),
            "mse": float(np.mean((a - b) ** 2))}


# ----------------------------------------------------------------------------
# Entity-level scores for BIO / IOB2 (and IOBES) tags, as seqeval's default mode


def _split_tag(tag):
    # "B-PER" -> ("B", "PER"); "O" -> ("O", "_"); a bare "B" -> ("B", "_").
    return tag[0], tag[1:].split("-", 1)[-1] or "_"


def _chunk_ends(prev_tag, tag, prev_type, type_):
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag not in ("O", ".") and prev_type != type_


def _chunk_starts(prev_tag, tag, prev_type, type_):
    if tag in ("B", "S"):
        return True
    if prev_tag in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag not in ("O", ".") and prev_type != type_


def get_entities(tags):
    """Entity chunks of a tag sequence (conlleval rules, lenient like seqeval).

    An `I-X` after `O` or after another type starts a new entity (IOB1 style),
    so `["I-PER", "I-PER"]` is one PER entity.

    Args:
      tags: a list of tags, or a list of sentences (lists of tags); sentences
        are joined with an "O" between them, so positions are global.
    Returns:
      A list of (type, first_index, last_index), inclusive.
    """
    if any(isinstance(t, (list, tuple)) for t in tags):
        flat = []
        for sentence in tags:
            flat.extend(sentence)
            flat.append("O")
        tags = flat
    chunks = []
    prev_tag, prev_type, begin = "O", "", 0
    for i, tag in enumerate(list(tags) + ["O"]):
        if not isinstance(tag, str) or not tag:
            raise DataError(f"tag {i}: expected a non-empty string, got {tag!r}")
        t, type_ = _split_tag(tag)
        if _chunk_ends(prev_tag, t, prev_type, type_):
            chunks.append((prev_type, begin, i - 1))
        if _chunk_starts(prev_tag, t, prev_type, type_):
            begin = i
        prev_tag, prev_type = t, type_
    return chunks


def entity_scores(true_tags, pred_tags):
    """Micro-averaged entity precision, recall and F1 (seqeval's `f1_score` default).

    Args:
      true_tags, pred_tags: lists of sentences, each a list of tag strings;
        sentence i of both must have the same length.
    Returns:
      {"precision", "recall", "f1": fractions in [0, 1], "num_true", "num_pred",
       "num_correct": entity counts, "per_type": {type: {"precision", "recall",
       "f1", "support"}}}.
    """
    if len(true_tags) != len(pred_tags):
        raise DataError(f"true and predicted tags differ in number of sentences: "
                        f"{len(true_tags)} != {len(pred_tags)}")
    for i, (t, p) in enumerate(zip(true_tags, pred_tags)):
        if len(t) != len(p):
            raise DataError(f"sentence {i}: {len(t)} true tags but {len(p)} predicted")
    true_entities = collections.defaultdict(set)
    pred_entities = collections.defaultdict(set)
    for type_, start, end in get_entities([list(s) for s in true_tags]):
        true_entities[type_].add((start, end))
    for type_, start, end in get_entities([list(s) for s in pred_tags]):
        pred_entities[type_].add((start, end))
    per_type = {}
    totals = np.zeros(3, dtype=np.int64)
    for type_ in sorted(set(true_entities) | set(pred_entities)):
        tp = len(true_entities[type_] & pred_entities[type_])
        n_pred = len(pred_entities[type_])
        n_true = len(true_entities[type_])
        totals += (tp, n_pred, n_true)
        per_type[type_] = dict(zip(("precision", "recall", "f1"), _prf(tp, n_pred, n_true)),
                               support=n_true)
    tp, n_pred, n_true = (int(v) for v in totals)
    precision, recall, f1 = _prf(tp, n_pred, n_true)
    return {"precision": precision, "recall": recall, "f1": f1, "num_true": n_true,
            "num_pred": n_pred, "num_correct": tp, "per_type": per_type}


def _prf(tp, n_pred, n_true):
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_true if n_true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return float(precision), float(recall), float(f1)


def ner_metrics(true_tags, pred_tags):
    """Percentages for `eval_results.json`: entity precision/recall/f1 and token accuracy."""
    scores = entity_scores(true_tags, pred_tags)
    tokens = sum(len(s) for s in true_tags)
    same = sum(t == p for ts, ps in zip(true_tags, pred_tags) for t, p in zip(ts, ps))
    return {"precision": 100.0 * scores["precision"], "recall": 100.0 * scores["recall"],
            "f1": 100.0 * scores["f1"], "accuracy": 100.0 * same / tokens if tokens else 0.0}


# ----------------------------------------------------------------------------
# SQuAD


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
