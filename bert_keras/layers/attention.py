"""Multi-head self-attention with a fused QKV projection and an additive padding mask."""

import math

import keras
from keras import ops

from bert_keras.layers import plan
from bert_keras.layers.dropout import Dropout
from bert_keras.layers.ops import attention as attention_ops
from bert_keras.layers.ops import dense as dense_ops
from bert_keras.layers.ops.softmax import MASK_VALUE, select_masked_softmax  # noqa: F401 - named here too

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


@keras.saving.register_keras_serializable(package="bert_keras")
class BertSelfAttention(keras.layers.Layer):
    """Bidirectional multi-head self-attention (no causal mask).

    Q, K and V come from one fused [H, 3H] projection (one matmul instead of
    three; checkpoint converters split/concatenate it).  Scores, the mask and the
    softmax are float32 whatever the compute dtype, so bf16/fp16 stay stable.

    The attention itself has three implementations, one table (`ops.attention.ATTENTION`),
    which the kernel plan (`bert_keras.layers.plan.KernelPlan.attention_for`) chooses from:
    - "plain", keras.ops: the reference, and every path with dropout on JAX and torch;
    - "sdpa", `keras.ops.dot_product_attention` on JAX and torch where no dropout applies
      (inference, or ``attention_dropout`` 0): cuDNN flash attention on JAX GPUs, PyTorch's
      SDPA kernels; in float32 the same numbers within the parity bounds (docs/results.md);
    - "xla", on TensorFlow in 16-bit training: the Q/K/V split and the masked softmax with its
      dropout are XLA kernels (`ops.attention.qkv_heads`, `ops.softmax.masked_softmax_dropout`).
    The plain steps take the plan's softmax (in 16-bit TensorFlow inference TensorFlow's kernel,
    `ops.softmax.masked_softmax`, oneDNN's on bf16) and, in bf16 inference with oneDNN, its
    projections (`ops.dense.dense_rows`).

    Args:
        masking: `MASKINGS` ("additive" by default; "select" for full-integer TFLite).
        kernels: `bert_keras.layers.plan.KERNELS` ("auto" by default).

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
        self.kernels = plan.check_kernels(kernels)
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
        choice = plan.current_plan(self.kernels, self.compute_dtype, training, packed=packing is not None)
        # bf16 inference with oneDNN: the projections as oneDNN convolutions (`ops.dense.dense_rows`)
        onednn = choice.dense == "onednn"
        qkv = dense_ops.dense(self.qkv, x, onednn)
        if packing is not None:
            qkv = packing.scatter(qkv)
        implementation = choice.attention_for(self.masking, bool(training) and self.attention_dropout > 0)
        context = attention_ops.ATTENTION[implementation](
            qkv, attention_bias, self.num_heads, 1.0 / math.sqrt(self.head_size), choice.softmax_for(self.masking),
            self.dropout, training)
        if packing is not None:
            context = packing.gather(context)
        return dense_ops.dense(self.output_dense, context, onednn)

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
