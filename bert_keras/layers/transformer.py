"""The post-LN Transformer encoder block of BERT."""

import keras

from bert_keras.layers.activations import get_activation
from bert_keras.layers import fused
from bert_keras.layers.dropout import Dropout
from bert_keras.layers.normalization import LayerNorm
from bert_keras.layers.attention import BertSelfAttention


@keras.saving.register_keras_serializable(package="bert_keras")
class TransformerBlock(keras.layers.Layer):
    """x = LN(x + Dropout(SelfAttention(x))); x = LN(x + Dropout(W2 act(W1 x))).

    Call:
        x: [B, L, H]; attention_bias: float32 [B, 1, 1, L].
    Returns:
        [B, L, H].
    """

    def __init__(self, hidden_size, num_heads, intermediate_size, hidden_act="gelu", dropout=0.1,
                 attention_dropout=0.1, layer_norm_eps=1e-12, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.dropout_rate = dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        policy = self.dtype_policy
        self.attention = BertSelfAttention(hidden_size=hidden_size, num_heads=num_heads,
                                           attention_dropout=attention_dropout,
                                           initializer_range=initializer_range, dtype=policy, name="attention")
        self.attention_dropout_layer = Dropout(dropout, dtype=policy)
        self.attention_layer_norm = LayerNorm(
            epsilon=layer_norm_eps, dtype=policy, name="attention_layer_norm")
        self.intermediate = keras.layers.Dense(intermediate_size, activation=get_activation(hidden_act),
                                               kernel_initializer=init, dtype=policy, name="intermediate")
        self.output_dense = keras.layers.Dense(hidden_size, kernel_initializer=init, dtype=policy,
                                               name="output")
        self.output_dropout = Dropout(dropout, dtype=policy)
        self.output_layer_norm = LayerNorm(
            epsilon=layer_norm_eps, dtype=policy, name="output_layer_norm")

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
        if fused.use_fused_training(self, training):  # never with packing: that is inference only
            return fused.transformer_block_forward(self, x, attention_bias)
        attended = self.attention(x, attention_bias, training=training, packing=packing)
        x = self.attention_layer_norm(x + self.attention_dropout_layer(attended, training=training))
        hidden = self.output_dense(self.intermediate(x))
        return self.output_layer_norm(x + self.output_dropout(hidden, training=training))

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
        }
