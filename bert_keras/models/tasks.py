"""Fine-tuning models: a pre-trained `BertEncoder` plus a small task head.

Every head is a dense layer kept in float32 (logits are float32 under mixed
precision).  ``dropout`` defaults to the encoder config's hidden dropout (0.1).
"""

import keras
from keras import ops

from bert_keras.models.encoder import INPUT_NAMES, BertEncoder, encoder_inputs
from bert_keras.models.inference import InMemoryPredict
from bert_keras.models.pretrainer import _deserialize_encoder


def _head(units, encoder, name):
    init = keras.initializers.TruncatedNormal(stddev=encoder.config.initializer_range)
    return keras.layers.Dense(units, kernel_initializer=init, dtype="float32", name=name)


class _TaskModel(InMemoryPredict):
    """Shared (de)serialisation: the encoder plus the constructor's keyword arguments."""

    def _head_config(self):
        return {}

    def get_config(self):
        return {"encoder": keras.saving.serialize_keras_object(self.encoder), "name": self.name,
                "trainable": self.trainable, **self._head_config()}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(_deserialize_encoder(config), **config)


class _DenseHeadModel(_TaskModel):
    """Dropout + a dense head on one of the encoder's outputs (``_features``)."""

    _features = "pooled_output"

    def __init__(self, encoder: BertEncoder, num_classes, dropout=None, real_tokens_only=None, **kwargs):
        # Layers are attributes only after Model.__init__ (torch's Module requires it).
        rate = encoder.config.dropout if dropout is None else dropout
        dropout_layer = keras.layers.Dropout(rate)
        classifier = _head(num_classes, encoder, "classifier")
        inputs = encoder_inputs()
        features = encoder(inputs)[self._features]
        super().__init__(inputs=inputs, outputs=classifier(dropout_layer(features)), **kwargs)
        self.encoder = encoder
        self.num_classes = num_classes
        self.dropout_rate = rate
        self.dropout = dropout_layer
        self.classifier = classifier
        # Per-sequence outputs read only the [CLS] row, so inference may skip the padding.
        self.real_tokens_only = self._features == "pooled_output" if real_tokens_only is None else real_tokens_only

    def call(self, inputs, training=None, mask=None):
        if training or not self.real_tokens_only:
            return super().call(inputs, training=training, mask=mask)
        features = self.encoder(inputs, training=False, real_tokens_only=True)[self._features]
        return self.classifier(features)  # dropout is the identity at inference

    def _head_config(self):
        return {"num_classes": self.num_classes, "dropout": self.dropout_rate,
                "real_tokens_only": self.real_tokens_only}


@keras.saving.register_keras_serializable(package="bert_keras")
class BertClassifier(_DenseHeadModel):
    """Sequence(-pair) classification or regression on the pooled [CLS] output.

    Inputs: the encoder's dict of int32 [B, L].  Output: float32 logits [B, C];
    ``num_classes=1`` is regression (STS-B style; train with mean squared error).
    ``real_tokens_only`` (default True): inference runs the encoder on the real tokens only
    (`bert_keras.layers.unpadded`, TensorFlow): the same logits, less work on padded batches.

    Example:
        >>> import bert_keras as bk
        >>> clf = bk.BertClassifier(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=100)), 3)
    """

    def __init__(self, encoder: BertEncoder, num_classes=2, dropout=None, real_tokens_only=True, **kwargs):
        super().__init__(encoder, num_classes, dropout, real_tokens_only, **kwargs)


@keras.saving.register_keras_serializable(package="bert_keras")
class BertTokenClassifier(_DenseHeadModel):
    """Per-token classification (NER, POS): logits float32 [B, L, C] from every T_i."""

    _features = "sequence_output"

    def __init__(self, encoder: BertEncoder, num_classes=9, dropout=None, **kwargs):
        super().__init__(encoder, num_classes, dropout, False, **kwargs)

    def _head_config(self):
        return {"num_classes": self.num_classes, "dropout": self.dropout_rate}


@keras.saving.register_keras_serializable(package="bert_keras")
class _SplitSpan(keras.layers.Layer):
    def call(self, logits):
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

    def compute_output_shape(self, logits_shape):
        return {"start_logits": logits_shape[:-1], "end_logits": logits_shape[:-1]}


@keras.saving.register_keras_serializable(package="bert_keras")
class BertSpanLabeler(_TaskModel):
    """Extractive QA (SQuAD): start vector S and end vector E dotted with every T_i.

    Outputs ``start_logits`` and ``end_logits`` float32 [B, L].  For SQuAD v2.0 the
    no-answer score is start_logits[:, 0] + end_logits[:, 0] (the [CLS] span).
    """

    def __init__(self, encoder: BertEncoder, **kwargs):
        span_head = _head(2, encoder, "span_head")
        inputs = encoder_inputs()
        sequence = encoder(inputs)["sequence_output"]
        super().__init__(inputs=inputs, outputs=_SplitSpan(name="split_span")(span_head(sequence)), **kwargs)
        self.encoder = encoder
        self.span_head = span_head


@keras.saving.register_keras_serializable(package="bert_keras")
class _FlattenChoices(keras.layers.Layer):
    """[B, K, L] -> [B*K, L]."""

    def call(self, x):
        return ops.reshape(x, (-1, ops.shape(x)[-1]))

    def compute_output_shape(self, x_shape):
        return (None, x_shape[-1])


@keras.saving.register_keras_serializable(package="bert_keras")
class _UnflattenChoices(keras.layers.Layer):
    """scores [B*K, 1] and the [B, K, L] input -> [B, K]."""

    def call(self, scores, like):
        return ops.reshape(scores, (ops.shape(like)[0], ops.shape(like)[1]))

    def compute_output_shape(self, scores_shape, like_shape):
        return (like_shape[0], like_shape[1])


@keras.saving.register_keras_serializable(package="bert_keras")
class BertMultipleChoice(_TaskModel):
    """Multiple choice (SWAG): each (context, ending) pair scored on C, softmax over K.

    Inputs: the encoder's three int32 inputs shaped [B, K, L].  Output: float32
    logits [B, K].  ``real_tokens_only`` as in `BertClassifier`.
    """

    def __init__(self, encoder: BertEncoder, dropout=None, real_tokens_only=True, **kwargs):
        rate = encoder.config.dropout if dropout is None else dropout
        dropout_layer = keras.layers.Dropout(rate)
        classifier = _head(1, encoder, "classifier")
        inputs = encoder_inputs(prefix_shape=(None,))
        flatten = _FlattenChoices(name="flatten_choices")
        pooled = encoder({name: flatten(inputs[name]) for name in INPUT_NAMES})["pooled_output"]
        scores = classifier(dropout_layer(pooled))
        logits = _UnflattenChoices(name="unflatten_choices")(scores, inputs["token_ids"])
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.encoder = encoder
        self.dropout_rate = rate
        self.dropout = dropout_layer
        self.classifier = classifier
        self.real_tokens_only = real_tokens_only

    def call(self, inputs, training=None, mask=None):
        if training or not self.real_tokens_only:
            return super().call(inputs, training=training, mask=mask)
        shape = ops.shape(inputs["token_ids"])
        flat = {name: ops.reshape(inputs[name], (-1, shape[-1])) for name in INPUT_NAMES}
        pooled = self.encoder(flat, training=False, real_tokens_only=True)["pooled_output"]
        return ops.reshape(self.classifier(pooled), (shape[0], shape[1]))

    def _head_config(self):
        return {"dropout": self.dropout_rate, "real_tokens_only": self.real_tokens_only}
