"""`BertPretrainer`: the encoder plus the masked-LM (tied) and next-sentence heads."""

import keras
from keras import ops

from bert_keras import _private_api
from bert_keras.layers import MaskedLMHead, cross_entropy, fused
from bert_keras.models.encoder import INPUT_NAMES, BertEncoder, encoder_inputs
from bert_keras.models.inference import InMemoryPredict


def _deserialize_encoder(config):
    encoder = config.pop("encoder")
    if isinstance(encoder, dict):
        encoder = keras.saving.deserialize_keras_object(encoder)
    return encoder


@keras.saving.register_keras_serializable(package="bert_keras")
class BertPretrainer(InMemoryPredict):
    """MLM + NSP pre-training model (Devlin et al., 2019, section 3.1).

    Inputs: the encoder's dict plus ``masked_positions`` int32 [B, P].
    Outputs: ``mlm_logits`` float32 [B, P, V] (projection tied to the token
    embeddings, plus a bias) and ``nsp_logits`` float32 [B, 2] (0 = IsNext).

    Trains with a plain ``compile(optimizer=...)`` + ``fit`` on
    ``(features, labels)`` from `bert_keras.data.pretraining_dataset`, labels being
    ``masked_ids`` [B, P], ``masked_weights`` [B, P] and ``next_sentence_label`` [B]:
    loss = weighted mean MLM cross-entropy over real targets + mean NSP
    cross-entropy (an optional label ``mlm_denominator`` [B] replaces the MLM target
    count: what gradient accumulation over micro-batches of unequal counts needs);
    metrics ``mlm_accuracy``, ``nsp_accuracy``, ``mlm_loss``, ``nsp_loss``.  On
    TensorFlow, where the encoder's ``kernels`` allow it (`fused.use_fused`: not inside a
    ``jit_compile=True`` step), the MLM cross-entropy is `cross_entropy.sparse_softmax_cross_entropy`.

    Example:
        >>> import bert_keras as bk, keras
        >>> pre = bk.BertPretrainer(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=100)))
        >>> pre.compile(optimizer=keras.optimizers.AdamW(1e-4))
    """

    def __init__(self, encoder: BertEncoder, **kwargs):
        cfg = encoder.config
        # === Layers === (attributes only after Model.__init__, which torch requires)
        masked_lm_head = MaskedLMHead(token_embedding=encoder.token_embedding, hidden_act=cfg.hidden_act,
                                           layer_norm_eps=cfg.layer_norm_eps,
                                           initializer_range=cfg.initializer_range, kernels=encoder.kernels,
                                           dtype=encoder.embeddings.dtype_policy, name="masked_lm_head")
        # Heads produce float32 logits whatever the policy (softmax/loss in float32).
        nsp_head = keras.layers.Dense(
            2, kernel_initializer=keras.initializers.TruncatedNormal(stddev=cfg.initializer_range),
            dtype="float32", name="nsp_head")

        # === Functional graph ===
        inputs = encoder_inputs()
        inputs["masked_positions"] = keras.Input(shape=(None,), dtype="int32", name="masked_positions")
        features = encoder({name: inputs[name] for name in INPUT_NAMES})
        outputs = {
            "mlm_logits": masked_lm_head(features["sequence_output"], inputs["masked_positions"]),
            "nsp_logits": nsp_head(features["pooled_output"]),
        }
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.encoder = encoder
        self.masked_lm_head = masked_lm_head
        self.nsp_head = nsp_head
        self.mlm_accuracy = keras.metrics.SparseCategoricalAccuracy(name="mlm_accuracy")
        self.nsp_accuracy = keras.metrics.SparseCategoricalAccuracy(name="nsp_accuracy")
        self.mlm_loss = keras.metrics.Mean(name="mlm_loss")
        self.nsp_loss = keras.metrics.Mean(name="nsp_loss")

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if _private_api.has_compiled_loss(self) or y is None:
            return super().compute_loss(x, y, y_pred, sample_weight, training)
        weights = ops.cast(y["masked_weights"], "float32")
        if fused.use_fused(self.encoder.kernels):
            # TensorFlow, outside an XLA compile: the [B * P, V] cross-entropy as XLA passes
            logits = y_pred["mlm_logits"]
            mlm_ce = ops.reshape(cross_entropy.sparse_softmax_cross_entropy(
                ops.reshape(ops.cast(y["masked_ids"], "int32"), (-1,)),
                ops.reshape(ops.cast(logits, "float32"), (-1, ops.shape(logits)[-1]))), ops.shape(weights))
        else:
            mlm_ce = keras.losses.sparse_categorical_crossentropy(
                y["masked_ids"], y_pred["mlm_logits"], from_logits=True)
        # Google's normalisation: sum over real targets / (count + 1e-5).  With gradient
        # accumulation over k micro-batches, ``mlm_denominator`` (per sequence, all equal) is
        # (total count of the k + 1e-5) / k: the mean of the k gradients is then the gradient
        # of one k-times larger batch, whatever each micro-batch's own count.
        if isinstance(y, dict) and "mlm_denominator" in y:
            denominator = ops.mean(ops.cast(y["mlm_denominator"], "float32"))
        else:
            denominator = ops.sum(weights) + 1e-5
        mlm_loss = ops.sum(mlm_ce * weights) / denominator
        nsp_loss = ops.mean(keras.losses.sparse_categorical_crossentropy(
            y["next_sentence_label"], y_pred["nsp_logits"], from_logits=True))
        self.mlm_loss.update_state(mlm_loss)
        self.nsp_loss.update_state(nsp_loss)
        loss = mlm_loss + nsp_loss
        if self.losses:
            loss = loss + ops.sum(self.losses)
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        if isinstance(y, dict) and "masked_ids" in y:
            self.mlm_accuracy.update_state(y["masked_ids"], y_pred["mlm_logits"],
                                           sample_weight=y["masked_weights"])
            self.nsp_accuracy.update_state(y["next_sentence_label"], y_pred["nsp_logits"])
        return super().compute_metrics(x, y, y_pred, sample_weight)

    def get_config(self):
        return {"encoder": keras.saving.serialize_keras_object(self.encoder), "name": self.name,
                "trainable": self.trainable}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(_deserialize_encoder(config), **config)
