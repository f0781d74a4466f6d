"""BERT input embeddings: token + segment + learned position, summed, LayerNorm, dropout."""

import keras
from keras import ops

from bert_keras.layers import plan
from bert_keras.layers.dropout import Dropout
from bert_keras.layers.normalization import LayerNorm
from bert_keras.layers.ops import dropout as dropout_ops
from bert_keras.layers.ops import layer_norm as layer_norm_ops


@keras.saving.register_keras_serializable(package="bert_keras")
class BertEmbeddings(keras.layers.Layer):
    """Sum of token, segment and learned absolute position embeddings.

    Call:
        token_ids: int32 [B, L]; segment_ids: int32 [B, L].
    Returns:
        float [B, L, H] in the layer's compute dtype, after LayerNorm and dropout.

    The position table has ``max_position_embeddings`` rows from the start (the
    paper's two-phase schedule trains rows 128..511 only in phase 2); a sequence
    of length L uses rows 0..L-1.  ``kernels`` (`bert_keras.layers.plan.KERNELS`): in
    16-bit training where the kernel plan chooses "xla", the sum, LayerNorm and dropout are one
    XLA kernel (`ops.layer_norm.embeddings_layer_norm_dropout`).  ``stream_scales``: the
    LayerNorm's (`LayerNorm`).
    """

    def __init__(self, vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2,
                 dropout=0.1, layer_norm_eps=1e-12, initializer_range=0.02, kernels="auto", stream_scales=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.kernels = plan.check_kernels(kernels)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.token_embedding = keras.layers.Embedding(
            vocab_size, hidden_size, embeddings_initializer=init, dtype=self.dtype_policy,
            name="token_embedding")
        self.segment_embedding = keras.layers.Embedding(
            type_vocab_size, hidden_size, embeddings_initializer=init, dtype=self.dtype_policy,
            name="segment_embedding")
        self.layer_norm = LayerNorm(
            epsilon=layer_norm_eps, kernels=kernels, stream_scales=stream_scales, dtype=self.dtype_policy,
            name="layer_norm")
        self.dropout = Dropout(dropout, kernels=kernels, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.token_embedding.build((None, None))
        self.segment_embedding.build((None, None))
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
        )
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, token_ids, segment_ids, training=None, packing=None):
        """With ``packing`` (inference, `bert_keras.layers.unpadded`): the real tokens only plus
        the packing's spare row, [T + 1, H]."""
        if packing is not None:
            positions = ops.take(self.position_embeddings, packing.positions, axis=0)
            token_ids, segment_ids = packing.gather(token_ids), packing.gather(segment_ids)
        else:
            positions = self.position_embeddings[:ops.shape(token_ids)[1]][None]
        token, segment = self.token_embedding(token_ids), self.segment_embedding(segment_ids)
        choice = plan.current_plan(self.kernels, self.compute_dtype, training, packed=packing is not None)
        if choice.embeddings == "xla":
            norm = self.layer_norm
            return layer_norm_ops.embeddings_layer_norm_dropout(
                token, segment, positions[0], norm.gamma.value, norm.beta.value, norm.epsilon,
                *dropout_ops.mask_args(self.dropout, ops.shape(token)))
        x = token + segment + ops.cast(positions, self.compute_dtype)
        return self.dropout(self.layer_norm(x, training=training), training=training)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_size,)

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "dropout": self.dropout_rate,
            "layer_norm_eps": self.layer_norm_eps,
            "initializer_range": self.initializer_range,
            "kernels": self.kernels,
            **({} if self.layer_norm.stream_scales is None
               else {"stream_scales": self.layer_norm.get_config()["stream_scales"]}),
        }
