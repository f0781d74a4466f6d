"""The distributed optimiser step of pre-training and the MLM + NSP loss terms.

One optimiser step, on every replica:
  * ``gradient_accumulation_steps`` (k) micro-batches are taken; the loss of
    the step is that of one batch k times larger: MLM cross-entropy summed
    over real targets divided by the *global* number of real targets (all
    replicas, all micro-batches), plus NSP cross-entropy summed and divided
    by the global number of sequences.  Each replica's gradient is thus its
    share of the global gradient, and their sum is the exact global gradient.
  * gradients are summed across replicas, clipped to global norm
    ``clipnorm`` (Keras optimisers clip *before* their cross-replica sum, i.e.
    per replica, which is not the global norm: the loop clips itself), and
    handed to the optimiser (AdamW with the ``adam_rule`` update, or LAMB;
    decoupled weight decay, none on LayerNorm and biases, warm-up + linear decay).
  * fp16 uses dynamic loss scaling (`keras.optimizers.LossScaleOptimizer`
    skips steps whose gradients overflow); bf16 needs none.
"""

from __future__ import annotations


import keras
import numpy as np
import tensorflow as tf

from bert_keras.errors import BertKerasError
from bert_keras.layers.cross_entropy import sparse_softmax_cross_entropy

# Order of the statistics a step returns (summed over replicas and steps).
_STATS = ("loss", "mlm_loss", "nsp_loss", "mlm_correct", "mlm_count", "nsp_correct", "nsp_count")


class NonFiniteLossError(BertKerasError):
    """The training loss became NaN or infinite; the last good checkpoint is kept."""



def pretraining_terms(labels, outputs):
    """Summed MLM/NSP cross-entropies and correct counts of one (micro-)batch.

    Returns float32 scalars: mlm_sum (cross-entropy summed over real targets),
    mlm_count (real targets), mlm_correct, nsp_sum, nsp_count (sequences), nsp_correct.
    """
    weights = tf.cast(labels["masked_weights"], tf.float32)
    mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
    nsp_logits = tf.cast(outputs["nsp_logits"], tf.float32)
    masked_ids = tf.cast(labels["masked_ids"], tf.int32)
    nsp_label = tf.cast(labels["next_sentence_label"], tf.int32)
    vocab = tf.shape(mlm_logits)[-1]
    mlm_ce = tf.reshape(sparse_softmax_cross_entropy(tf.reshape(masked_ids, [-1]),
                                                     tf.reshape(mlm_logits, [-1, vocab])), tf.shape(masked_ids))
    nsp_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=nsp_label, logits=nsp_logits)
    mlm_hit = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), masked_ids), tf.float32)
    nsp_hit = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32), nsp_label), tf.float32)
    return {
        "mlm_sum": tf.reduce_sum(mlm_ce * weights),
        "mlm_count": tf.reduce_sum(weights),
        "mlm_correct": tf.reduce_sum(mlm_hit * weights),
        "nsp_sum": tf.reduce_sum(nsp_ce),
        "nsp_count": tf.cast(tf.size(nsp_ce), tf.float32),
        "nsp_correct": tf.reduce_sum(nsp_hit),
    }


# =========================================================================== the loop
class PretrainLoop:
    """The distributed optimiser step, independent of files and checkpoints.

    Args:
      model: a `BertPretrainer` built under ``strategy.scope()``.
      optimizer: a Keras optimiser built under the scope, without its own
        clipping (the loop clips the global gradient); a
        `keras.optimizers.LossScaleOptimizer` for fp16.
      strategy: the `tf.distribute.Strategy`.
      clipnorm: global-norm clip of the summed gradient (None: none).
      jit_compile: compile each micro-batch's forward and backward pass with XLA
        (the cross-replica sum and the optimiser update stay outside).

    ``train(iterator, steps, accumulation)`` runs ``steps`` optimiser steps on a
    distributed iterator, ``accumulation`` micro-batches each, and returns the
    statistics (``_STATS``) summed over the steps as a numpy float64 array.
    """

    def __init__(self, model, optimizer, strategy, clipnorm=1.0, jit_compile=False):
        self.model, self.optimizer, self.strategy = model, optimizer, strategy
        self.clipnorm = clipnorm
        self.jit_compile = jit_compile
        self.loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        self._functions = {}
        # Forward + backward of a micro-batch, the bulk of the work, is what XLA compiles.
        self._micro_fn = tf.function(self._micro_step, jit_compile=True) if jit_compile else self._micro_step

    def _micro_step(self, features, labels, mlm_denominator, nsp_denominator):
        """Gradients (dense, float32) and statistics of one micro-batch on one replica.

        Holds no cross-replica communication, so it can be XLA-compiled under
        any strategy (``jit_compile``: the layers then see an XLA compile and run their plain
        math, `bert_keras.layers.fused.use_fused`)."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            t = pretraining_terms(labels, outputs)
            mlm_loss = t["mlm_sum"] / mlm_denominator
            nsp_loss = t["nsp_sum"] / nsp_denominator
            loss = mlm_loss + nsp_loss
            scaled = self.optimizer.scale_loss(loss) if self.loss_scaled else loss
        grads = tape.gradient(scaled, variables)
        # IndexedSlices (embedding lookups) become dense: they are summed and all-reduced.
        grads = [tf.convert_to_tensor(g) if g is not None else tf.zeros_like(v.value)
                 for g, v in zip(grads, variables)]
        stats = tf.stack([loss, mlm_loss, nsp_loss, t["mlm_correct"], t["mlm_count"], t["nsp_correct"],
                          t["nsp_count"]])
        return grads, stats

    def _replica_step(self, micro_batches):
        ctx = tf.distribute.get_replica_context()
        variables = self.model.trainable_variables
        # The normalisers of one k-times-larger global batch, known before any gradient.
        local = tf.stack([
            tf.add_n([tf.reduce_sum(tf.cast(lab["masked_weights"], tf.float32)) for _, lab in micro_batches]),
            tf.add_n([tf.cast(tf.shape(lab["next_sentence_label"])[0], tf.float32) for _, lab in micro_batches]),
        ])
        total = ctx.all_reduce(tf.distribute.ReduceOp.SUM, local)
        mlm_denominator, nsp_denominator = total[0] + 1e-5, total[1]  # Google's 1e-5

        grads, stats = None, None
        for features, labels in micro_batches:
            micro, micro_stats = self._micro_fn(features, labels, mlm_denominator, nsp_denominator)
            if grads is None:  # no zero-filled start: adding it costs a pass over every gradient
                grads, stats = micro, micro_stats
            else:
                grads = [g + m for g, m in zip(grads, micro)]
                stats += micro_stats

        grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        scale = tf.cast(self.optimizer.dynamic_scale, tf.float32) if self.loss_scaled else None
        if scale is not None:
            grads = [g / scale for g in grads]
        if self.clipnorm:
            grads, _ = tf.clip_by_global_norm(grads, self.clipnorm)
        n = ctx.num_replicas_in_sync
        if n > 1:  # the optimiser sums over replicas again: hand each 1/n of the total
            grads = [g / n for g in grads]
        if scale is not None:  # the LossScaleOptimizer checks, unscales and adapts the scale
            grads = [g * scale for g in grads]
        self.optimizer.apply(grads, variables)
        return stats

    def _function(self, accumulation):
        if accumulation not in self._functions:
            replica_step = self._replica_step

            @tf.function
            def train_steps(iterator, steps):
                totals = tf.zeros([len(_STATS)], tf.float32)
                for _ in tf.range(steps):
                    micro_batches = [next(iterator) for _ in range(accumulation)]
                    per_replica = self.strategy.run(replica_step, args=(micro_batches,))
                    totals += self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
                return totals

            self._functions[accumulation] = train_steps
        return self._functions[accumulation]

    def train(self, iterator, steps, accumulation=1):
        totals = self._function(accumulation)(iterator, tf.constant(steps, tf.int32))
        return np.asarray(totals.numpy(), np.float64)

