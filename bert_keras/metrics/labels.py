"""Classification and regression scores, equal to sklearn.metrics and scipy.stats."""

from __future__ import annotations

import math

import numpy as np

from bert_keras.errors import DataError


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
    if denom == 0.0 or not math.isfinite(denom):
        return float("nan")
    r = float(np.dot(a, b)) / denom
    if not math.isfinite(r):  # NaN must stay NaN: max(-1, min(1, nan)) would be 1.0
        return float("nan")
    return float(max(-1.0, min(1.0, r)))


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
    if not (np.all(np.isfinite(np.asarray(a, np.float64))) and np.all(np.isfinite(np.asarray(b, np.float64)))):
        return float("nan")  # ranks would hide a NaN or an infinity behind a finite-looking score
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
