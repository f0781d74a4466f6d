"""Held-out MLM / NSP evaluation of a pre-training model, with the trivial baselines."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bert_keras.errors import BertKerasError


def evaluate_pretrainer(model, dataset, batches, mask_id=None, forward=None):
    """Held-out MLM/NSP accuracy and loss over ``batches`` batches (dropout off), on any backend.

    Also returns the trivial baselines: ``baseline_mlm_accuracy`` (always
    predicting the most frequent target token of these batches, an upper bound
    for that baseline), ``unigram_entropy`` (the entropy in nats of these
    targets' own token distribution: the cross-entropy of the best predictor
    that ignores the context) and ``baseline_nsp_accuracy`` (the majority class).

    With ``mask_id`` (the id of ``[MASK]``), the MLM accuracy is also split by
    what the input held at the target (the 80/10/10 rule):
    ``mlm_accuracy_at_mask`` (``[MASK]``: only the context can tell),
    ``mlm_accuracy_at_kept`` (the token itself, left in place: copying solves it)
    and ``mlm_accuracy_at_random`` (a random token).  A model on the unigram
    plateau copies the kept 10% and predicts the most frequent token elsewhere:
    its overall accuracy looks like ``0.1 + baseline`` while
    ``mlm_accuracy_at_mask`` stays at the baseline.

    Args:
      model: a `BertPretrainer` (or any callable giving ``mlm_logits`` and ``nsp_logits``).
      dataset: a `tf.data.Dataset` or an iterable of ``(features, labels)``.
      batches: how many batches to read.
      mask_id: the id of ``[MASK]`` (None: no 80/10/10 split).
      forward: ``features -> {name: numpy}`` in place of the model's own compiled forward pass
        (a job of several processes gathers the outputs of each one's share).
    """
    forward = forward or _forward(model)
    sums = dict.fromkeys(("mlm_sum", "mlm_count", "mlm_correct", "nsp_sum", "nsp_count", "nsp_correct"), 0.0)
    targets_seen, nsp_labels = [], []
    split = {"mask": [0, 0], "kept": [0, 0], "random": [0, 0]}  # [correct, count]
    for i, (features, labels) in enumerate(_numpy_batches(dataset)):
        if i >= batches:
            break
        out = {k: np.asarray(v, np.float32) for k, v in forward(features).items()}
        terms, hit = _terms(labels, out)
        for name, value in terms.items():
            sums[name] += value
        ids, weights = labels["masked_ids"].astype(np.int64), labels["masked_weights"]
        nsp_label = labels["next_sentence_label"]
        real = weights > 0
        targets_seen.append(ids[real])
        nsp_labels.append(nsp_label)
        if mask_id is not None:
            shown = np.take_along_axis(features["token_ids"], features["masked_positions"], 1)
            for name, where in (("mask", shown == mask_id), ("kept", shown == ids),
                                ("random", (shown != mask_id) & (shown != ids))):
                split[name][0] += int(np.sum(hit & where & real))
                split[name][1] += int(np.sum(where & real))
    if not sums["nsp_count"] or not sums["mlm_count"]:
        raise BertKerasError("held-out data gave no batch to evaluate")
    _, counts = np.unique(np.concatenate(targets_seen), return_counts=True)
    result = summary(sums, counts.astype(np.float64), np.concatenate(nsp_labels))
    if mask_id is not None:
        for name, (correct, count) in split.items():
            result[f"mlm_accuracy_at_{name}"] = correct / count if count else float("nan")
            result[f"mlm_targets_at_{name}"] = count
    return result


def _forward(model):
    """``features -> {name: numpy}``: the model with dropout off, compiled on its backend
    (a `tf.function` on TensorFlow, Keras' predict step elsewhere)."""
    import keras

    if keras.backend.backend() == "tensorflow" or not hasattr(model, "predict_on_batch"):
        fn = tf.function(lambda features: model(features, training=False))
        return lambda features: {k: np.asarray(v) for k, v in fn(features).items()}
    return lambda features: {k: np.asarray(keras.ops.convert_to_numpy(v))
                             for k, v in model.predict_on_batch(features).items()}


def _numpy_batches(dataset):
    if isinstance(dataset, tf.data.Dataset):
        yield from dataset.as_numpy_iterator()
        return
    for features, labels in dataset:
        yield ({k: np.asarray(v) for k, v in features.items()}, {k: np.asarray(v) for k, v in labels.items()})


def _terms(labels, outputs, rows=4096):
    """`pretraining_terms` of a batch (the plain math), as floats, and which MLM targets were
    predicted (bool ``[B, P]``, by the rule the terms count with), a few thousand MLM targets at a
    time (the logits of a large batch at 512 tokens are gigabytes)."""
    import keras

    from bert_keras.models.pretrainer import pretraining_terms

    n = len(labels["next_sentence_label"])
    step = max(1, rows // max(1, labels["masked_ids"].shape[-1]))
    sums, hits = {}, []
    for start in range(0, n, step):
        part = slice(start, start + step)
        chunk_labels = {k: v[part] for k, v in labels.items()}
        chunk_outputs = {k: v[part] for k, v in outputs.items()}
        terms = pretraining_terms(chunk_labels, chunk_outputs, kernels="plain", hits=True)
        hits.append(keras.ops.convert_to_numpy(terms.pop("mlm_hit")) > 0)
        for name, value in terms.items():
            sums[name] = sums.get(name, 0.0) + float(value)
    return sums, np.concatenate(hits)


def summary(sums, target_counts, nsp_labels) -> dict:
    """The held-out results from summed terms (``mlm_sum``, ``mlm_count``, ``mlm_correct`` and
    the same for ``nsp``), the count of each MLM target token and the NSP labels seen: loss
    and accuracy per task, and the baselines a model that learnt nothing would reach
    (always the most frequent target; the unigram entropy; the majority NSP label)."""
    frequencies = target_counts / target_counts.sum()
    return {
        "mlm_accuracy": sums["mlm_correct"] / sums["mlm_count"],
        "nsp_accuracy": sums["nsp_correct"] / sums["nsp_count"],
        "mlm_loss": sums["mlm_sum"] / sums["mlm_count"],
        "nsp_loss": sums["nsp_sum"] / sums["nsp_count"],
        "baseline_mlm_accuracy": float(target_counts.max()) / sums["mlm_count"],
        "unigram_entropy": float(-np.sum(frequencies * np.log(frequencies))),
        "baseline_nsp_accuracy": float(max(np.mean(nsp_labels == 0), np.mean(nsp_labels == 1))),
        "mlm_targets": int(sums["mlm_count"]),
        "sequences": int(sums["nsp_count"]),
    }
