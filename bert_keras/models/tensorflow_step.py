"""`BertPretrainer`'s training step on TensorFlow: one optimiser step under any `tf.distribute`
strategy (one device, Mirrored, MultiWorkerMirrored, TPU), over one batch or k micro-batches.

Keras' own TensorFlow step clips each replica's gradient before the cross-replica sum (not the
global norm) and normalises a replica's MLM loss by its own target count.  This step:

* takes a batch ``[B, ...]`` or k micro-batches stacked on a leading axis ``[k, B, ...]``
  (``pretraining_dataset(...).batch(k)``).  The loss of the step is that of one batch k times
  larger: the MLM cross-entropy summed over real targets divided by the *global* count of real
  targets (every replica, every micro-batch, + 1e-5 as in Google's code), plus the NSP
  cross-entropy summed over the global count of sequences.  Each replica's gradient is thus its
  share of the global gradient;
* with several replicas, sums the gradients across them, clips the sum to the optimiser's
  ``global_clipnorm`` and hands each replica 1/n of it (the optimiser sums over the replicas
  again; its own clip then sees a gradient within the bound and leaves it as it is).  On one
  replica the optimiser clips the gradient itself;
* with ``xla_micro_steps`` (the pre-training runner's ``jit_compile``), compiles each micro-batch's
  forward and backward pass with XLA and keeps the cross-replica sum and the optimiser update
  outside, so every strategy compiles;
* fp16 (a `keras.optimizers.LossScaleOptimizer`): the clip sees the unscaled gradient, and the
  optimiser checks, unscales and adapts the scale.

The model's metrics hold the step's statistics, summed over replicas when read outside the step:
``loss``, ``mlm_loss`` and ``nsp_loss`` (means over the steps since the last reset of the global
batch's terms) and ``mlm_accuracy`` / ``nsp_accuracy`` (their ``total`` and ``count`` are the
correct and real targets, and the correct and all sequences).
"""

from __future__ import annotations

import functools

import keras
import tensorflow as tf


def train_step(model, data, xla_micro_steps=False):
    """One optimiser step of ``model`` (a compiled `BertPretrainer`) on ``data`` = (features, labels).

    ``xla_micro_steps``: each micro-batch's forward and backward pass one XLA computation, the
    cross-replica sum and the optimiser update outside it (what the pre-training runner's
    ``jit_compile`` means; Keras' ``compile(jit_compile=True)`` compiles the whole step instead).
    """
    features, labels = data[0], data[1]
    ctx = tf.distribute.get_replica_context()
    replicas = ctx.num_replicas_in_sync
    micro_batches = _micro_batches(features, labels)

    # The normalisers of the whole global batch, known before any gradient.
    local = tf.stack([
        tf.add_n([tf.reduce_sum(tf.cast(lab["masked_weights"], tf.float32)) for _, lab in micro_batches]),
        tf.add_n([tf.cast(tf.shape(lab["next_sentence_label"])[0], tf.float32) for _, lab in micro_batches]),
    ])
    total = ctx.all_reduce(tf.distribute.ReduceOp.SUM, local) if replicas > 1 else local
    denominators = (total[0] + 1e-5, total[1])
    gradients = functools.partial(micro_step, model)
    if xla_micro_steps:
        gradients = tf.function(gradients, jit_compile=True)

    grads, stats = None, None
    for micro_features, micro_labels in micro_batches:
        micro, micro_stats = gradients(micro_features, micro_labels, *denominators)
        if grads is None:  # no zero-filled start: adding it costs a pass over every gradient
            grads, stats = micro, micro_stats
        else:
            grads = [g + m for g, m in zip(grads, micro)]
            stats = [s + m for s, m in zip(stats, micro_stats)]

    optimizer = model.optimizer
    if replicas > 1:
        grads = _global_clip(optimizer, ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads), replicas)
    optimizer.apply(grads, model.trainable_variables)

    loss, mlm_loss, nsp_loss, mlm_correct, mlm_count, nsp_correct, nsp_count = stats
    metrics = {m.name: m for m in model.metrics}
    # A replica's loss terms are its share of the global batch's: the mean over replicas of
    # ``share * replicas`` (what the metrics' cross-replica sums give) is the global value.
    for name, value in (("loss", loss), ("mlm_loss", mlm_loss), ("nsp_loss", nsp_loss)):
        if name in metrics:
            metrics[name].update_state(value * replicas)
    for name, correct, count in (("mlm_accuracy", mlm_correct, mlm_count), ("nsp_accuracy", nsp_correct, nsp_count)):
        metrics[name].total.assign_add(correct)
        metrics[name].count.assign_add(count)
    return model.get_metrics_result()


def micro_step(model, features, labels, mlm_denominator, nsp_denominator):
    """Gradients (dense, float32) and statistics of one micro-batch on one replica.

    Holds no cross-replica communication, so it can be XLA-compiled under any strategy."""
    from bert_keras.models.pretrainer import pretraining_terms

    optimizer = model.optimizer
    loss_scaled = _scales_loss(optimizer)
    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        outputs = model(features, training=True)
        t = pretraining_terms(labels, outputs, model.encoder.kernels)
        mlm_loss = t["mlm_sum"] / mlm_denominator
        nsp_loss = t["nsp_sum"] / nsp_denominator
        loss = mlm_loss + nsp_loss
        if model.losses:  # layer penalties: this micro-batch's share of the global batch
            share = tf.cast(tf.shape(labels["next_sentence_label"])[0], tf.float32) / nsp_denominator
            loss = loss + tf.add_n(model.losses) * share
        scaled = optimizer.scale_loss(loss) if loss_scaled else loss
    grads = tape.gradient(scaled, variables)
    # IndexedSlices (embedding lookups) become dense: they are summed and all-reduced.
    grads = [tf.convert_to_tensor(g) if g is not None else tf.zeros_like(v.value) for g, v in zip(grads, variables)]
    stats = [loss, mlm_loss, nsp_loss, t["mlm_correct"], t["mlm_count"], t["nsp_correct"], t["nsp_count"]]
    return grads, stats


def _micro_batches(features, labels):
    """[(features, labels)]: the batch itself, or the k micro-batches stacked on its leading axis."""
    if features["token_ids"].shape.rank != 3:
        return [(features, labels)]
    k = features["token_ids"].shape[0]
    if k is None:
        raise ValueError("stacked micro-batches need a static leading axis: batch them with drop_remainder=True")
    return [({n: v[i] for n, v in features.items()}, {n: v[i] for n, v in labels.items()}) for i in range(k)]


def _global_clip(optimizer, grads, replicas):
    """The summed gradient clipped to the optimiser's global norm, 1/``replicas`` of it per replica."""
    scale = _loss_scale(optimizer)
    clip = (optimizer.inner_optimizer if scale is not None else optimizer).global_clipnorm
    if scale is not None:
        grads = [g / scale for g in grads]
    if clip:
        grads, _ = tf.clip_by_global_norm(grads, clip)
    grads = [g / replicas for g in grads]
    if scale is not None:
        grads = [g * scale for g in grads]
    return grads


def _scales_loss(optimizer) -> bool:
    """Whether ``optimizer`` is a `keras.optimizers.LossScaleOptimizer` (fp16)."""
    return isinstance(optimizer, keras.optimizers.LossScaleOptimizer)


def _loss_scale(optimizer):
    """The dynamic loss scale (float32) of a `keras.optimizers.LossScaleOptimizer`, else None."""
    return tf.cast(optimizer.dynamic_scale, tf.float32) if _scales_loss(optimizer) else None
