"""Scaled dot-product attention over a fused [B, L, 3H] Q/K/V projection: one table.

`ATTENTION` maps the kernel plan's choice (`bert_keras.layers.plan.KernelPlan.attention_for`)
to an implementation (a read-only mapping); each takes the projections and the additive bias and returns the context
[B, L, H] (before the output projection):

- "plain", keras.ops: the reference, and every path with dropout on JAX and torch; its softmax
  is the plan's (`softmax.SOFTMAX`);
- "sdpa", `keras.ops.dot_product_attention` where no dropout applies: cuDNN flash attention on
  JAX GPUs, PyTorch's SDPA kernels; in float32 the same numbers within the parity bounds;
- "xla", TensorFlow 16-bit training: the Q/K/V split (`qkv_heads`) and the masked softmax with
  its dropout (`softmax.masked_softmax_dropout`) as XLA kernels.
"""

import types

import keras
from keras import ops

from bert_keras.layers.ops import dropout as dropout_ops
from bert_keras.layers.ops import softmax as softmax_ops
from bert_keras.layers.ops.xla import compiled


def qkv_heads(qkv, num_heads, query_scale):
    """[B, L, 3H] fused projection -> q, k, v [B, N, L, D]; q scaled by query_scale (one XLA kernel).

    The gradient is written out (`_qkv_heads_gradient`), in TensorFlow's bf16 transposes: XLA's
    autodiff of the split kept copies of q, k and v for a backward that converted, transposed and
    concatenated in float32, 1.6x slower forward and backward on [32, 128, 1536] bf16 (15.5 vs
    9.9 ms, medians of 9 rounds), for the same numbers."""
    import tensorflow as tf

    def fn(qkv, num_heads, query_scale):
        shape = tf.shape(qkv)
        q, k, v = (tf.transpose(tf.reshape(part, [shape[0], shape[1], num_heads, -1]), [0, 2, 1, 3])
                   for part in tf.split(qkv, 3, axis=-1))
        return q * tf.cast(query_scale, q.dtype), k, v

    @tf.custom_gradient
    def split(qkv):
        return compiled("qkv_heads", fn)(qkv, num_heads, query_scale), lambda *d: _qkv_heads_gradient(*d, query_scale)

    return split(qkv)


def _qkv_heads_gradient(dq, dk, dv, query_scale):
    """The gradient of `qkv_heads`: dq (times the scale), dk and dv [B, N, L, D] -> [B, L, 3H]."""
    import tensorflow as tf

    d = tf.stack([dq * tf.cast(query_scale, dq.dtype), dk, dv], axis=0)  # [3, B, N, L, D]
    shape = tf.shape(d)
    return tf.reshape(tf.transpose(d, [1, 3, 0, 2, 4]), [shape[1], shape[3], 3 * shape[2] * shape[4]])


def _split_heads(qkv, num_heads, head_size, scale):
    # One transpose takes Q, K and V to [B, N, L, D] together and one takes the context
    # back: two passes over the activations per layer, where einsums over [B, L, N, D]
    # operands transpose q, k, v and the context one by one.  Unstack, not index: its
    # gradient is one stack, while each indexed slice's is a zero-filled copy.
    batch, length = ops.shape(qkv)[0], ops.shape(qkv)[1]
    qkv = ops.reshape(qkv, (batch, length, 3, num_heads, head_size))
    q, k, v = ops.unstack(ops.transpose(qkv, (2, 0, 3, 1, 4)), 3, axis=0)
    return q * ops.cast(scale, q.dtype), k, v


def _scores(q, k):
    if keras.backend.backend() == "tensorflow":  # K read transposed in place
        import tensorflow as tf

        return tf.matmul(q, k, transpose_b=True)
    return ops.einsum("bhqd,bhkd->bhqk", q, k)


def _merge_heads(context, qkv):
    batch, length = ops.shape(qkv)[0], ops.shape(qkv)[1]
    context = ops.transpose(context, (0, 2, 1, 3))
    return ops.reshape(context, (batch, length, ops.shape(qkv)[-1] // 3))


def plain(qkv, attention_bias, num_heads, scale, softmax, dropout, training):
    """The reference: split heads, q k^T, the ``softmax`` the plan names, ``dropout`` (the
    layer's `bert_keras.layers.Dropout`), times v, heads merged."""
    head_size = ops.shape(qkv)[-1] // (3 * num_heads)
    q, k, v = _split_heads(qkv, num_heads, head_size, scale)
    scores = _scores(q, k)
    if softmax == "select":
        probs = softmax_ops.select_masked_softmax(ops.cast(scores, "float32"), attention_bias)
    elif softmax in ("onednn", "tensorflow"):  # TensorFlow's kernel, in bf16 with oneDNN (float32 inside)
        probs = softmax_ops.masked_softmax(scores, attention_bias, softmax == "onednn")
    else:
        probs = softmax_ops.masked_softmax_float32(scores, attention_bias)
    probs = dropout(ops.cast(probs, dropout.compute_dtype), training=training)
    return _merge_heads(ops.matmul(probs, v), qkv)


def sdpa(qkv, attention_bias, num_heads, scale, softmax, dropout, training):
    """`keras.ops.dot_product_attention` on [B, L, N, D] operands (no transposes; the backend
    picks its fused kernel); only where no dropout applies."""
    batch, length, width = ops.shape(qkv)[0], ops.shape(qkv)[1], ops.shape(qkv)[-1]
    q, k, v = ops.unstack(ops.reshape(qkv, (batch, length, 3, num_heads, width // (3 * num_heads))), 3, axis=2)
    context = ops.dot_product_attention(q, k, v, bias=ops.cast(attention_bias, q.dtype), scale=scale)
    return ops.reshape(context, (batch, length, width // 3))


def xla(qkv, attention_bias, num_heads, scale, softmax, dropout, training):
    """TensorFlow 16-bit training: `qkv_heads` and `softmax.masked_softmax_dropout` as XLA kernels."""
    import tensorflow as tf

    q, k, v = qkv_heads(qkv, num_heads, scale)
    scores = tf.matmul(q, k, transpose_b=True)
    probs = softmax_ops.masked_softmax_dropout(
        scores, attention_bias, *dropout_ops.mask_args(dropout, ops.shape(scores)), softmax == "onednn")
    return _merge_heads(ops.matmul(probs, v), qkv)


# The implementations by the plan's name (read-only), in the manner of Hugging Face's
# attention-function table.
ATTENTION = types.MappingProxyType({"plain": plain, "sdpa": sdpa, "xla": xla})
