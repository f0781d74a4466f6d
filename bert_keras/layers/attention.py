"""Multi-head self-attention with a fused QKV projection and an additive padding mask."""

import math

import keras
from keras import ops

# Added to the scores of padded keys.  Google's value; exp(-10000) is 0 in float32,
# and scores/softmax are always computed in float32 (see below).
MASK_VALUE = -10000.0


def attention_bias_from_padding_mask(padding_mask):
    """int/bool [B, L] (1 = real token) -> float32 [B, 1, 1, L] additive bias (0 or -10000)."""
    mask = ops.cast(padding_mask, "float32")
    return (1.0 - mask)[:, None, None, :] * MASK_VALUE


@keras.saving.register_keras_serializable(package="bert_keras")
class BertSelfAttention(keras.layers.Layer):
    """Bidirectional multi-head self-attention (no causal mask).

    Q, K and V come from one fused [H, 3H] projection (one matmul instead of
    three; checkpoint converters split/concatenate it).  Scores, the mask and the
    softmax are float32 whatever the compute dtype, so bf16/fp16 stay stable.

    Call:
        x: [B, L, H]; attention_bias: float32 [B, 1, 1, L] from
        `attention_bias_from_padding_mask`.
    Returns:
        [B, L, H] (before the block's dropout/residual/LayerNorm).
    """

    def __init__(self, hidden_size, num_heads, attention_dropout=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
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
        self.dropout = keras.layers.Dropout(attention_dropout, dtype=self.dtype_policy)

    def build(self, input_shape):
        self.qkv.build(input_shape)
        self.output_dense.build(tuple(input_shape[:-1]) + (self.hidden_size,))
        self.built = True

    def call(self, x, attention_bias, training=None):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        qkv = ops.reshape(self.qkv(x), (batch, length, 3, self.num_heads, self.head_size))
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        q = q * ops.cast(1.0 / math.sqrt(self.head_size), q.dtype)
        scores = ops.einsum("bqhd,bkhd->bhqk", q, k)
        # The bias may arrive autocast to the compute dtype; -10000 survives bf16/fp16.
        scores = ops.cast(scores, "float32") + ops.cast(attention_bias, "float32")
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        probs = self.dropout(probs, training=training)
        context = ops.einsum("bhqk,bkhd->bqhd", probs, v)
        context = ops.reshape(context, (batch, length, self.hidden_size))
        return self.output_dense(context)

    def compute_output_shape(self, x_shape, attention_bias_shape=None):
        return x_shape

    def get_config(self):
        return {
            **super().get_config(),
            "hidden_size": self.hidden_size,
            "num_heads": self.num_heads,
            "attention_dropout": self.attention_dropout,
            "initializer_range": self.initializer_range,
        }
