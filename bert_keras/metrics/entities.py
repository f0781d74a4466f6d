"""Entity-level scores for BIO / IOB2 (and IOBES) tags, as seqeval's default mode."""

from __future__ import annotations

import collections

import numpy as np

from bert_keras.errors import DataError


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
