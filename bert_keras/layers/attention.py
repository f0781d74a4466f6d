"""Multi-head self-attention with a fused QKV projection and an additive padding mask."""

import math

import keras
from keras import ops

from bert_keras.layers import fused
from bert_keras.layers.dropout import Dropout

# Added to the scores of padded keys.  Google's value; exp(-10000) is 0 in float32,
# and scores/softmax are always computed in float32 (see below).
MASK_VALUE = -10000.0


def attention_bias_from_padding_mask(padding_mask):
    """int/bool [B, L] (1 = real token) -> float32 [B, 1, 1, L] additive bias (0 or -10000)."""
    mask = ops.cast(padding_mask, "float32")
    # expand_dims, not [:, None, None, :]: a new-axis slice on a dynamic length
    # has no TFLite builtin (an open-length TFLite file would need Flex).
    return ops.expand_dims(ops.expand_dims((1.0 - mask) * MASK_VALUE, 1), 1)


# `BertSelfAttention`'s ``masking`` option.  "additive" (the default, for training and
# inference): softmax(scores + bias), Google's formulation.  "select": the same
# probabilities computed so that every intermediate tensor stays within the range of the
# real scores, for full-integer TFLite, where one int8 scale per tensor cannot hold both
# the scores and a -10,000 bias (the int8 exports trace a copy of the model with it).
MASKINGS = ("additive", "select")


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


@keras.saving.register_keras_serializable(package="bert_keras")
class BertSelfAttention(keras.layers.Layer):
    """Bidirectional multi-head self-attention (no causal mask).

    Q, K and V come from one fused [H, 3H] projection (one matmul instead of
    three; checkpoint converters split/concatenate it).  Scores, the mask and the
    softmax are float32 whatever the compute dtype, so bf16/fp16 stay stable.

    The attention itself, written once, has three implementations of its steps:
    - plain keras.ops: the reference, and every path with dropout on JAX and torch;
    - `keras.ops.dot_product_attention` on JAX and torch where no dropout applies
      (inference, or ``attention_dropout`` 0): cuDNN flash attention on JAX GPUs, PyTorch's
      SDPA kernels; in float32 the same numbers within the parity bounds (docs/results.md);
    - on TensorFlow, where `fused.use_fused` allows it in 16-bit training, the Q/K/V split
      and the masked softmax with its dropout are XLA kernels (`fused.qkv_heads`,
      `fused.masked_softmax_dropout`); in bf16 inference with oneDNN the projections and the
      softmax are oneDNN's kernels (`fused.dense_rows`, `fused.masked_softmax`).

    Args:
        masking: `MASKINGS` ("additive" by default; "select" for full-integer TFLite).
        kernels: `bert_keras.layers.fused.KERNELS` ("auto" by default).

    Call:
        x: [B, L, H]; attention_bias: float32 [B, 1, 1, L] from
        `attention_bias_from_padding_mask`.
    Returns:
        [B, L, H] (before the block's dropout/residual/LayerNorm).
    """

    def __init__(self, hidden_size, num_heads, attention_dropout=0.1, initializer_range=0.02,
                 masking="additive", kernels="auto", **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
        if masking not in MASKINGS:
            raise ValueError(f"masking={masking!r}; choose one of {', '.join(MASKINGS)}")
        self.masking = masking
        self.kernels = fused.check_kernels(kernels)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_size = hidden_size // num_heads
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.qkv = keras.layers.Dense(3 * hidden_size, kernel_initializer=init,
                                      dtype=self.dtype_policy, name="qkv")
        self.output_dense = keras.layers.Dense(hidden_size, kernel_initializer=init,
                                               dtype=self.dtype_policy, name="output")
        self.dropout = Dropout(attention_dropout, kernels=kernels, dtype=self.dtype_policy)

    def build(self, input_shape):
        self.qkv.build(input_shape)
        self.output_dense.build(tuple(input_shape[:-1]) + (self.hidden_size,))
        self.built = True

    def call(self, x, attention_bias, training=None, packing=None):
        """x: [B, L, H]; or, with ``packing`` (`bert_keras.layers.unpadded.Packing`), the real
        tokens only plus the packing's spare row, [T + 1, H], and the result is [T + 1, H] too."""
        # bf16 inference with oneDNN: the projections as oneDNN convolutions (`fused.dense_rows`)
        onednn = not training and fused.use_onednn_bf16(self.kernels, self.compute_dtype)
        qkv = fused.dense(self.qkv, x, onednn)
        if packing is not None:
            qkv = packing.scatter(qkv)
        fast = self.masking == "additive" and fused.use_fused(self.kernels, self.compute_dtype)
        context = self._attend(qkv, attention_bias, training, fused_softmax=fast,
                               fused_kernels=bool(training) and packing is None and fast)
        if packing is not None:
            context = packing.gather(context)
        return fused.dense(self.output_dense, context, onednn)

    def _attend(self, qkv, attention_bias, training, fused_kernels=False, fused_softmax=False):
        """[B, L, 3H] fused projections -> [B, L, H] context (before the output dense)."""
        batch, length = ops.shape(qkv)[0], ops.shape(qkv)[1]
        scale = 1.0 / math.sqrt(self.head_size)
        dropout_active = bool(training) and self.attention_dropout > 0
        if keras.backend.backend() != "tensorflow" and not dropout_active and self.masking == "additive":
            # [B, L, N, D] operands: no transposes; the backend picks its fused kernel.
            q, k, v = ops.unstack(ops.reshape(qkv, (batch, length, 3, self.num_heads, self.head_size)), 3, axis=2)
            context = ops.dot_product_attention(q, k, v, bias=ops.cast(attention_bias, q.dtype), scale=scale)
            return ops.reshape(context, (batch, length, self.hidden_size))
        if fused_kernels:
            q, k, v = fused.qkv_heads(qkv, self.num_heads, scale)
        else:
            # One transpose takes Q, K and V to [B, N, L, D] together and one takes the context
            # back: two passes over the activations per layer, where einsums over [B, L, N, D]
            # operands transpose q, k, v and the context one by one.  Unstack, not index: its
            # gradient is one stack, while each indexed slice's is a zero-filled copy.
            qkv = ops.reshape(qkv, (batch, length, 3, self.num_heads, self.head_size))
            q, k, v = ops.unstack(ops.transpose(qkv, (2, 0, 3, 1, 4)), 3, axis=0)
            q = q * ops.cast(scale, q.dtype)
        if keras.backend.backend() == "tensorflow":  # K read transposed in place
            import tensorflow as tf

            scores = tf.matmul(q, k, transpose_b=True)
        else:
            scores = ops.einsum("bhqd,bhkd->bhqk", q, k)
        if fused_kernels:
            probs = fused.masked_softmax_dropout(
                scores, attention_bias, *fused.dropout_mask_args(self.dropout, ops.shape(scores)))
        else:
            # The bias may arrive autocast to the compute dtype; -10000 survives bf16/fp16.
            if self.masking == "select":
                probs = select_masked_softmax(ops.cast(scores, "float32"), attention_bias)
            elif fused_softmax:  # TensorFlow's kernel, in bf16 with oneDNN (float32 inside)
                probs = fused.masked_softmax(scores, attention_bias)
            else:
                probs = ops.softmax(ops.cast(scores, "float32") + ops.cast(attention_bias, "float32"), axis=-1)
            probs = self.dropout(ops.cast(probs, self.compute_dtype), training=training)
        context = ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3))
        return ops.reshape(context, (batch, length, self.hidden_size))

    def compute_output_shape(self, x_shape, attention_bias_shape=None):
        return x_shape

    def get_config(self):
        return {
            **super().get_config(),
            "hidden_size": self.hidden_size,
            "num_heads": self.num_heads,
            "attention_dropout": self.attention_dropout,
            "initializer_range": self.initializer_range,
            "masking": self.masking,
            "kernels": self.kernels,
        }
