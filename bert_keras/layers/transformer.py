"""The post-LN Transformer encoder block of BERT."""

import keras
from keras import ops

from bert_keras.layers import plan
from bert_keras.layers.activations import activate, get_activation
from bert_keras.layers.attention import BertSelfAttention
from bert_keras.layers.dropout import Dropout
from bert_keras.layers.normalization import LayerNorm
from bert_keras.layers.ops import dense as dense_ops
from bert_keras.layers.ops import dropout as dropout_ops
from bert_keras.layers.ops import gelu as gelu_ops
from bert_keras.layers.ops import layer_norm as layer_norm_ops


@keras.saving.register_keras_serializable(package="bert_keras")
class TransformerBlock(keras.layers.Layer):
    """x = LN(x + Dropout(SelfAttention(x))); x = LN(x + Dropout(W2 act(W1 x))).

    The math is written once, in `call`; ``kernels`` (`bert_keras.layers.plan.KERNELS`)
    is an input of the kernel plan (`bert_keras.layers.plan`), which chooses where the
    TensorFlow kernels of `bert_keras.layers.ops` replace a step of it (16-bit training: the
    dropout-residual-LayerNorm ends of both halves and the GELU; bf16 inference with oneDNN:
    the feed-forward matmuls and GELU).  ``stream_scales``: None, or the (s_in, s_out) pairs of
    the two LayerNorms (`LayerNorm`), for the residual stream stored rescaled.  ``masking``: `BertSelfAttention`'s.

    Call:
        x: [B, L, H]; attention_bias: float32 [B, 1, 1, L].
    Returns:
        [B, L, H].
    """

    def __init__(self, hidden_size, num_heads, intermediate_size, hidden_act="gelu", dropout=0.1,
                 attention_dropout=0.1, layer_norm_eps=1e-12, initializer_range=0.02, masking="additive",
                 kernels="auto", stream_scales=None, **kwargs):
        super().__init__(**kwargs)
        get_activation(hidden_act)  # an unknown name fails here, not at the first call
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.dropout_rate = dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.kernels = plan.check_kernels(kernels)
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        policy = self.dtype_policy
        self.attention = BertSelfAttention(hidden_size=hidden_size, num_heads=num_heads,
                                           attention_dropout=attention_dropout,
                                           initializer_range=initializer_range, masking=masking, kernels=kernels,
                                           dtype=policy, name="attention")
        self.attention_dropout_layer = Dropout(dropout, kernels=kernels, dtype=policy)
        self.attention_layer_norm = LayerNorm(
            epsilon=layer_norm_eps, kernels=kernels, stream_scales=None if stream_scales is None else stream_scales[0],
            dtype=policy, name="attention_layer_norm")
        # The activation is applied in `call` (it takes the kernel choice).
        self.intermediate = keras.layers.Dense(intermediate_size, kernel_initializer=init, dtype=policy,
                                               name="intermediate")
        self.output_dense = keras.layers.Dense(hidden_size, kernel_initializer=init, dtype=policy,
                                               name="output")
        self.output_dropout = Dropout(dropout, kernels=kernels, dtype=policy)
        self.output_layer_norm = LayerNorm(
            epsilon=layer_norm_eps, kernels=kernels, stream_scales=None if stream_scales is None else stream_scales[1],
            dtype=policy, name="output_layer_norm")

    @property
    def masking(self):
        return self.attention.masking

    def build(self, input_shape):
        self.attention.build(input_shape)
        self.attention_layer_norm.build(input_shape)
        self.intermediate.build(input_shape)
        self.output_dense.build(tuple(input_shape[:-1]) + (self.intermediate_size,))
        self.output_layer_norm.build(input_shape)
        self.built = True

    def call(self, x, attention_bias, training=None, packing=None):
        """With ``packing`` (inference, `bert_keras.layers.unpadded`), x and the result are the
        real tokens only plus the packing's spare row, [T + 1, H]: everything but the
        attention is position-wise."""
        choice = plan.current_plan(self.kernels, self.compute_dtype, training, packed=packing is not None)
        attended = self.attention(x, attention_bias, training=training, packing=packing)
        x = self._add_and_norm(attended, x, self.attention_dropout_layer, self.attention_layer_norm,
                               training, choice.add_norm == "xla")
        if choice.ffn == "onednn" and self.hidden_act == "gelu" and dense_ops.plain_dense(self.intermediate):
            # inference: the first matmul, its bias and the GELU as one oneDNN kernel, the
            # second as a oneDNN convolution
            dense = self.intermediate
            hidden = gelu_ops.dense_gelu(x, dense.kernel.value, dense.bias.value)
            hidden = dense_ops.dense(self.output_dense, hidden, onednn=True)
        else:
            hidden = self.feed_forward(x, fused_kernel=choice.gelu == "xla")
        return self._add_and_norm(hidden, x, self.output_dropout, self.output_layer_norm,
                                  training, choice.add_norm == "xla")

    def feed_forward(self, x, fused_kernel=False):
        """W2 act(W1 x + b1) + b2, position-wise: [.., H] -> [.., H]."""
        return self.output_dense(activate(self.hidden_act, self.intermediate(x), fused_kernel=fused_kernel))

    @staticmethod
    def _add_and_norm(h, residual, dropout, norm, training, fused_kernel):
        """LN(residual + Dropout(h)), the end of both halves of the block."""
        if fused_kernel:
            return layer_norm_ops.dropout_residual_layer_norm(
                h, residual, *dropout_ops.mask_args(dropout, ops.shape(h)), norm.gamma.value, norm.beta.value,
                norm.epsilon)
        return norm(residual + dropout(h, training=training), training=training)

    def compute_output_shape(self, x_shape, attention_bias_shape=None):
        return x_shape

    def get_config(self):
        return {
            **super().get_config(),
            "hidden_size": self.hidden_size,
            "num_heads": self.num_heads,
            "intermediate_size": self.intermediate_size,
            "hidden_act": self.hidden_act,
            "dropout": self.dropout_rate,
            "attention_dropout": self.attention_dropout,
            "layer_norm_eps": self.layer_norm_eps,
            "initializer_range": self.initializer_range,
            "masking": self.masking,
            "kernels": self.kernels,
            **({} if self.attention_layer_norm.stream_scales is None else {"stream_scales": [
                norm.get_config()["stream_scales"] for norm in (self.attention_layer_norm, self.output_layer_norm)]}),
        }
