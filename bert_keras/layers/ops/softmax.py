"""The attention's masked softmax over the keys: the plain math and its fast variants.

`masked_softmax_float32` is the reference: softmax(scores + bias) on float32 scores whatever the
compute dtype, so bf16/fp16 stay stable.  The variants:

- `masked_softmax`: TensorFlow's softmax, on bf16 scores oneDNN's kernel (float32 inside);
- `masked_softmax_dropout`: that softmax with the attention dropout, the dropout and the
  backward one XLA kernel each (16-bit training);
- `select_masked_softmax`: the same probabilities with bounded intermediates (full-integer TFLite).
"""

from keras import ops

from bert_keras.layers.ops.dropout import apply_mask
from bert_keras.layers.ops.xla import compiled

# Added to the scores of padded keys.  Google's value; exp(-10000) is 0 in float32,
# and scores/softmax are always computed in float32.
MASK_VALUE = -10000.0


def masked_softmax_float32(scores, attention_bias):
    """softmax(scores + bias) over the last axis in float32.  scores [B, N, Lq, Lk], bias [B, 1, 1, Lk].

    The bias may arrive autocast to the compute dtype; -10000 survives bf16/fp16.
    """
    return ops.softmax(ops.cast(scores, "float32") + ops.cast(attention_bias, "float32"), axis=-1)


def masked_softmax(scores, attention_bias, onednn=False):
    """softmax(scores + bias) in scores' dtype, for `masked_softmax_dropout` and inference.

    With oneDNN (`plan.Hardware.onednn_bf16`) on bf16 scores, TensorFlow's softmax runs in oneDNN's kernel,
    which computes max, exp and sum in float32 and rounds the probabilities once: the same
    numbers as casting to float32 first, without the two casts of [B, N, Lq, Lk].
    """
    import tensorflow as tf

    if scores.dtype == tf.bfloat16 and onednn:
        return tf.nn.softmax(scores + tf.cast(attention_bias, scores.dtype), axis=-1)
    logits = tf.cast(scores, tf.float32) + tf.cast(attention_bias, tf.float32)
    return tf.cast(tf.nn.softmax(logits, axis=-1), scores.dtype)


def masked_softmax_dropout(scores, attention_bias, bits, threshold, scale, onednn=False):
    """Dropout(softmax(scores + bias)) in scores' dtype.  scores [B, N, Lq, Lk], bias [B, 1, 1, Lk].

    The softmax is TensorFlow's: with oneDNN (`plan.Hardware.onednn_bf16`) on bf16 scores,
    which computes max, exp and sum in float32 and rounds the probabilities once (the same
    numbers as casting to float32 first); otherwise on float32 scores.  XLA's exp and its
    reductions over the keys were twice as slow at 512 tokens.  The dropout and the backward
    pass, ``p * (g - sum(g * p))`` in float32 with ``g`` the gradient after dropout, are one
    XLA kernel each.
    """
    import tensorflow as tf

    @tf.custom_gradient
    def fn(scores):
        probs = masked_softmax(scores, attention_bias, onednn)
        out = probs if bits is None else compiled("dropout_apply", apply_mask)(probs, bits, threshold, scale)

        def grad(dy):
            return compiled("softmax_dropout_backward", _softmax_dropout_backward)(
                dy, probs, bits, threshold, scale)

        return out, grad

    return fn(scores)


def _softmax_dropout_backward(dy, probs, bits, threshold, scale):
    import tensorflow as tf

    g = tf.cast(apply_mask(dy, bits, threshold, scale), tf.float32)
    p = tf.cast(probs, tf.float32)
    return tf.cast(p * (g - tf.reduce_sum(g * p, -1, keepdims=True)), dy.dtype)


def select_masked_softmax(scores, attention_bias):
    """softmax over the keys where attention_bias is 0, with bounded intermediates.

    scores: float32 [B, N, Lq, Lk]; attention_bias: [B, 1, 1, Lk], 0 (keep) or
    MASK_VALUE.  Padded keys never enter a sum or a max: they are replaced by
    the row minimum before the max and the exp (so exp stays in (0, 1]) and by
    0 after it.  The normaliser is subtracted as a log (in [0, log Lk]), not
    divided by: TFLite's quantised DIV aborts when a raw int8 denominator
    happens to be 0.
    """
    keep = ops.greater(ops.cast(attention_bias, "float32"), MASK_VALUE / 2)
    floor = ops.min(scores, axis=-1, keepdims=True)
    shifted = ops.where(keep, scores, floor)
    shifted = shifted - ops.max(shifted, axis=-1, keepdims=True)
    zeros = ops.zeros_like(scores)
    log_norm = ops.log(ops.sum(ops.where(keep, ops.exp(shifted), zeros), axis=-1, keepdims=True))
    return ops.where(keep, ops.exp(shifted - log_norm), zeros)
