"""Small layers on top of the encoder: pooler, masked-LM head (tied), NSP head."""

import keras
from keras import ops

from bert_keras import _private_api
from bert_keras.layers import plan
from bert_keras.layers.activations import activate, get_activation
from bert_keras.layers.normalization import LayerNorm
from bert_keras.layers.ops import dense as dense_ops


def gather_positions(sequence, positions):
    """sequence [B, L, H], positions int [B, P] -> [B, P, H] (row b takes sequence[b, positions[b]])."""
    shape = ops.shape(sequence)
    batch, length, width = shape[0], shape[1], shape[2]
    offsets = ops.arange(batch, dtype="int32")[:, None] * length
    flat_positions = ops.reshape(ops.cast(positions, "int32") + offsets, (-1,))
    flat = ops.take(ops.reshape(sequence, (-1, width)), flat_positions, axis=0)
    return ops.reshape(flat, (batch, -1, width))


@keras.saving.register_keras_serializable(package="bert_keras")
class BertPooler(keras.layers.Layer):
    """tanh(W h_[CLS] + b): [B, L, H] -> [B, H], the sequence summary C of the paper."""

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            hidden_size, activation="tanh", dtype=self.dtype_policy, name="dense",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))

    def build(self, input_shape):
        self.dense.build((input_shape[0], input_shape[-1]))
        self.built = True

    def call(self, sequence_output):
        return self.dense(sequence_output[:, 0])

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.hidden_size)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "initializer_range": self.initializer_range}


@keras.saving.register_keras_serializable(package="bert_keras")
class MaskedLMHead(keras.layers.Layer):
    """MLM head: dense H->H + activation + LayerNorm, then logits = x E^T + b.

    E is the encoder's token embedding matrix (tied, not a copy): pass the
    encoder's ``token_embedding`` layer.  Logits are computed only at the masked
    positions, so the [*, V] projection costs B*P rows instead of B*L.

    ``kernels`` (`bert_keras.layers.plan.KERNELS`): an input of the kernel plan, which chooses
    the LayerNorm and the GELU and, in bf16 on a CPU whose bf16 matmuls are emulated, the
    float32 projection `ops.dense.tied_logits_float32`.

    Call:
        sequence_output [B, L, H], masked_positions int32 [B, P].
    Returns:
        float32 logits [B, P, V].
    """

    def __init__(self, token_embedding, hidden_act="gelu", layer_norm_eps=1e-12, initializer_range=0.02,
                 kernels="auto", **kwargs):
        super().__init__(**kwargs)
        get_activation(hidden_act)  # an unknown name fails here
        self.kernels = plan.check_kernels(kernels)
        self.token_embedding = token_embedding
        self.hidden_act = hidden_act
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.vocab_size, self.hidden_size = token_embedding.input_dim, token_embedding.output_dim
        # The activation is applied in `call` (it takes the kernel choice).
        self.transform = keras.layers.Dense(
            self.hidden_size, dtype=self.dtype_policy,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range), name="transform")
        self.layer_norm = LayerNorm(epsilon=layer_norm_eps, kernels=kernels, dtype=self.dtype_policy,
                                    name="layer_norm")

    def build(self, sequence_output_shape=None, masked_positions_shape=None):
        self.transform.build((None, None, self.hidden_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,), initializer="zeros")
        self.built = True

    def call(self, sequence_output, masked_positions, training=None):
        x = gather_positions(sequence_output, masked_positions)
        choice = plan.current_plan(self.kernels, self.compute_dtype, training)
        x = activate(self.hidden_act, self.transform(x), fused_kernel=choice.gelu == "xla")
        x = self.layer_norm(x, training=training)
        table = _private_api.stored_value(self.token_embedding.embeddings)  # its own dtype, not autocast
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            shape = tf.shape(x)
            rows = tf.reshape(x, [-1, self.hidden_size])
            if table.dtype == tf.float32 and choice.mlm_logits == "float32":
                logits = dense_ops.tied_logits_float32(rows, table)
            else:
                # x E^T as one matmul with transpose_b: the gradient for E comes out [V, H]
                # directly instead of as [H, V] plus a transpose of the whole table.
                logits = tf.matmul(rows, ops.cast(table, self.compute_dtype), transpose_b=True)
            logits = tf.reshape(logits, [shape[0], shape[1], self.vocab_size])
        else:
            logits = ops.matmul(x, ops.transpose(ops.cast(table, self.compute_dtype)))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_shape(self, sequence_output_shape, masked_positions_shape):
        return (sequence_output_shape[0], masked_positions_shape[1], self.vocab_size)

    def get_config(self):
        config = super().get_config()
        # The tied embedding layer is not serialised here; BertPretrainer re-attaches it.
        config.update({"hidden_act": self.hidden_act, "layer_norm_eps": self.layer_norm_eps,
                       "initializer_range": self.initializer_range, "kernels": self.kernels})
        return config
