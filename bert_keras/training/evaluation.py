"""Held-out MLM / NSP evaluation of a pre-training model, with the trivial baselines."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bert_keras.errors import BertKerasError
from bert_keras.training.loop import pretraining_terms


def evaluate_pretrainer(model, dataset, batches, mask_id=None):
    """Held-out MLM/NSP accuracy and loss over ``batches`` batches (dropout off).

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
    """
    @tf.function
    def forward(features, labels):
        outputs = model(features, training=False)
        predicted = tf.argmax(tf.cast(outputs["mlm_logits"], tf.float32), -1, output_type=tf.int32)
        return pretraining_terms(labels, outputs), predicted

    sums = {}
    target_counts = {}
    nsp_labels = []
    split = {"mask": [0, 0], "kept": [0, 0], "random": [0, 0]}  # [correct, count]
    for i, (features, labels) in enumerate(dataset):
        if i >= batches:
            break
        terms, predicted = forward(features, labels)
        for k, v in terms.items():
            sums[k] = sums.get(k, 0.0) + float(v)
        real = labels["masked_weights"].numpy() > 0
        targets = labels["masked_ids"].numpy()
        for token, count in zip(*np.unique(targets[real], return_counts=True)):
            target_counts[int(token)] = target_counts.get(int(token), 0) + int(count)
        nsp_labels.append(labels["next_sentence_label"].numpy())
        if mask_id is not None:
            shown = np.take_along_axis(features["token_ids"].numpy(), features["masked_positions"].numpy(), 1)
            hit = predicted.numpy() == targets
            for name, where in (("mask", shown == mask_id), ("kept", shown == targets),
                                ("random", (shown != mask_id) & (shown != targets))):
                split[name][0] += int(np.sum(hit & where & real))
                split[name][1] += int(np.sum(where & real))
    if not sums:
        raise BertKerasError("held-out data gave no batch to evaluate")
    nsp_labels = np.concatenate(nsp_labels)
    result = summary(sums, np.array(list(target_counts.values()), dtype=np.float64), nsp_labels)
    if mask_id is not None:
        for name, (correct, count) in split.items():
            result[f"mlm_accuracy_at_{name}"] = correct / count if count else float("nan")
            result[f"mlm_targets_at_{name}"] = count
    return result


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


def _log_softmax(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def evaluate_in_numpy(model, dataset, batches):
    """Held-out MLM/NSP loss and accuracy (dropout off) over ``batches`` batches, in numpy: the
    main keys of `evaluate_pretrainer` (whose forward pass is a tf.function), on any Keras backend."""
    sums = dict.fromkeys(("mlm_sum", "mlm_count", "mlm_correct", "nsp_sum", "nsp_count", "nsp_correct"), 0.0)
    targets_seen, nsp_labels = [], []
    for i, (features, labels) in enumerate(dataset.as_numpy_iterator()):
        if i >= batches:
            break
        out = model.predict_on_batch(features)
        mlm = _log_softmax(np.asarray(out["mlm_logits"], np.float64))
        nsp = _log_softmax(np.asarray(out["nsp_logits"], np.float64))
        ids, weights = labels["masked_ids"], labels["masked_weights"].astype(np.float64)
        nsp_label = labels["next_sentence_label"]
        sums["mlm_sum"] -= float(np.sum(np.take_along_axis(mlm, ids[..., None], -1)[..., 0] * weights))
        sums["mlm_count"] += float(weights.sum())
        sums["mlm_correct"] += float(np.sum((mlm.argmax(-1) == ids) * weights))
        sums["nsp_sum"] -= float(np.sum(np.take_along_axis(nsp, nsp_label[:, None], -1)))
        sums["nsp_count"] += float(len(nsp_label))
        sums["nsp_correct"] += float(np.sum(nsp.argmax(-1) == nsp_label))
        targets_seen.append(ids[weights > 0])
        nsp_labels.append(nsp_label)
    if not sums["nsp_count"] or not sums["mlm_count"]:
        raise BertKerasError("held-out data gave no batch to evaluate")
    _, counts = np.unique(np.concatenate(targets_seen), return_counts=True)
    return summary(sums, counts.astype(np.float64), np.concatenate(nsp_labels))
