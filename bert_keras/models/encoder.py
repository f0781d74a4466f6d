"""`BertEncoder`: embeddings -> N post-LN Transformer blocks -> pooler."""

import keras
import numpy as np

from bert_keras.config import BertConfig
from bert_keras.layers import BertEmbeddings, BertPooler, TransformerBlock, attention_bias_from_padding_mask, unpadded
from bert_keras.models.inference import InMemoryPredict
from bert_keras.models.inputs import INPUT_NAMES


def encoder_inputs(prefix_shape=()):
    """Fresh `keras.Input`s for the encoder's three int32 [B, *prefix_shape, L] inputs."""
    shape = tuple(prefix_shape) + (None,)
    return {name: keras.Input(shape=shape, dtype="int32", name=name) for name in INPUT_NAMES}


@keras.saving.register_keras_serializable(package="bert_keras")
class BertEncoder(InMemoryPredict):
    """The BERT encoder (Devlin et al., 2019) as a functional Keras model.

    Inputs (dict of int32 [B, L]):
        token_ids: WordPiece ids, ``[CLS] A [SEP] (B [SEP])`` then padding.
        segment_ids: 0 for segment A (incl. [CLS]), 1 for segment B.
        padding_mask: 1 for real tokens, 0 for padding.
    Outputs (dict):
        sequence_output: [B, L, H], the last block's hidden states.
        pooled_output: [B, H], tanh(dense(h_[CLS])).

    Example:
        >>> import numpy as np, bert_keras as bk
        >>> enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=100))
        >>> out = enc({"token_ids": np.array([[2, 5, 3, 0]], "int32"),
        ...            "segment_ids": np.zeros((1, 4), "int32"),
        ...            "padding_mask": np.array([[1, 1, 1, 0]], "int32")})
        >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
        ((1, 4, 128), (1, 128))

    Options (none changes the weights; each is in `get_config`):
        kernels: an input of the kernel plan (`bert_keras.layers.plan`), which chooses where the
            TensorFlow kernels of `bert_keras.layers.ops` replace steps of
            the layers' math: "auto" (default: 16-bit training on a CPU, never inside an
            XLA compile), "fused" (any TensorFlow device) or "plain" (keras.ops only).
        masking: the attention's padding mask, "additive" (default) or "select" (bounded
            intermediates, for full-integer TFLite).
        real_tokens_only: inference calls run on the real tokens only
            (`bert_keras.layers.unpadded`; TensorFlow): the same numbers at the real
            positions, 0 at the padding of ``sequence_output``.  Default False, so that
            every position equals the reference implementations'; a call may pass
            ``real_tokens_only=`` to override it (the per-sequence task models do).
        stream_scales: None (default), or the 2N + 1 per-channel factors [H] of a residual stream
            stored rescaled, for full-integer TFLite (`bert_keras.export.residual_scaling`, which
            also folds them into the weights of the copy it makes).
    """

    def __init__(self, config=None, dtype=None, kernels="auto", masking="additive", real_tokens_only=False,
                 stream_scales=None, **kwargs):
        if config is None:
            config = BertConfig()
        elif isinstance(config, dict):
            config = BertConfig.from_dict(config)
        c = config
        # === Layers === (locals until the Model is initialised: torch's Module refuses
        # sub-module attributes before its __init__)
        embeddings = BertEmbeddings(vocab_size=c.vocab_size, hidden_size=c.hidden_size,
                                         max_position_embeddings=c.max_position_embeddings,
                                         type_vocab_size=c.type_vocab_size, dropout=c.dropout,
                                         layer_norm_eps=c.layer_norm_eps,
                                         initializer_range=c.initializer_range, kernels=kernels,
                                         stream_scales=None if stream_scales is None else (None, stream_scales[0]),
                                         dtype=dtype, name="embeddings")
        transformer_layers = [
            TransformerBlock(hidden_size=c.hidden_size, num_heads=c.num_heads,
                             intermediate_size=c.intermediate_size, hidden_act=c.hidden_act, dropout=c.dropout,
                             attention_dropout=c.attention_dropout, layer_norm_eps=c.layer_norm_eps,
                             initializer_range=c.initializer_range, masking=masking, kernels=kernels,
                             stream_scales=None if stream_scales is None else (
                                 (stream_scales[2 * i], stream_scales[2 * i + 1]),
                                 (stream_scales[2 * i + 1], stream_scales[2 * i + 2])),
                             dtype=dtype, name=f"transformer_layer_{i}")
            for i in range(c.num_layers)
        ]
        pooler = BertPooler(c.hidden_size, c.initializer_range, dtype=dtype, name="pooler")

        # === Functional graph ===
        inputs = encoder_inputs()
        x = embeddings(inputs["token_ids"], inputs["segment_ids"])
        bias = attention_bias_from_padding_mask(inputs["padding_mask"])
        for block in transformer_layers:
            x = block(x, bias)
        outputs = {"sequence_output": x, "pooled_output": pooler(x)}
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)
        self.embeddings = embeddings
        self.transformer_layers = transformer_layers
        self.pooler = pooler
        self.config = config
        self.kernels = kernels
        self.masking = masking
        self.real_tokens_only = bool(real_tokens_only)
        self.stream_scales = None if stream_scales is None else tuple(np.asarray(s, np.float32) for s in stream_scales)

    def call(self, inputs, training=None, mask=None, real_tokens_only=None):
        if real_tokens_only is None:
            real_tokens_only = self.real_tokens_only
        if not unpadded.use_unpadded(self, training, real_tokens_only):
            return super().call(inputs, training=training, mask=mask)
        # Inference on the real tokens only (same numbers at the real positions, 0 at the padding).
        packing = unpadded.Packing(inputs["padding_mask"])
        x = self.embeddings(inputs["token_ids"], inputs["segment_ids"], training=training, packing=packing)
        bias = packing.attention_bias(attention_bias_from_padding_mask(inputs["padding_mask"]))
        for block in self.transformer_layers:
            x = block(x, bias, training=training, packing=packing)
        sequence = packing.scatter(x, full=True)
        return {"sequence_output": sequence, "pooled_output": self.pooler(sequence)}

    @property
    def token_embedding(self):
        """The [V, H] token embedding layer (tied to the MLM output projection)."""
        return self.embeddings.token_embedding

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name, "trainable": self.trainable,
                "kernels": self.kernels, "masking": self.masking, "real_tokens_only": self.real_tokens_only,
                **({} if self.stream_scales is None else {"stream_scales": [s.tolist() for s in self.stream_scales]}),
                # A functional Model reports float32 whatever its dtype argument; the layers
                # hold the policy the encoder was built with.
                "dtype": keras.dtype_policies.serialize(self.embeddings.dtype_policy)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)
