"""`BertPretrainer`: the encoder plus the masked-LM (tied) and next-sentence heads."""

import keras
from keras import ops

from bert_keras import _private_api
from bert_keras.layers import MaskedLMHead, cross_entropy, plan
from bert_keras.models.encoder import INPUT_NAMES, BertEncoder, encoder_inputs
from bert_keras.models.inference import InMemoryPredict


def pretraining_terms(labels, outputs, kernels="auto", hits=False):
    """The summed terms of the MLM + NSP loss of one (micro-)batch, on any backend: the one
    definition the training step, `BertPretrainer.compute_loss` and the pre-training runner use.

    Args:
        labels: ``masked_ids`` [B, P], ``masked_weights`` [B, P], ``next_sentence_label`` [B].
        outputs: ``mlm_logits`` [B, P, V] and ``nsp_logits`` [B, 2].
        kernels: the encoder's ``kernels`` option; where the kernel plan's ``loss`` is "xla"
            (TensorFlow, outside a whole-step XLA compile), the MLM cross-entropy is
            `cross_entropy.sparse_softmax_cross_entropy`.
        hits: also return ``mlm_hit``, 1.0 where the target's logit is the row's largest ([B, P],
            by `target_is_largest`), for counts split by how each target was shown.

    Returns:
        float32 scalars: ``mlm_sum`` (the MLM cross-entropy summed over real targets),
        ``mlm_count`` (real targets), ``mlm_correct``, ``nsp_sum``, ``nsp_count`` (sequences) and
        ``nsp_correct``.  Google's loss of a batch is ``mlm_sum / (mlm_count + 1e-5) + nsp_sum / nsp_count``.
    """
    weights = ops.cast(labels["masked_weights"], "float32")
    logits = ops.cast(outputs["mlm_logits"], "float32")
    nsp_logits = ops.cast(outputs["nsp_logits"], "float32")
    ids = ops.cast(labels["masked_ids"], "int32")
    nsp_label = ops.cast(labels["next_sentence_label"], "int32")
    if plan.current_plan(kernels, training=True).loss == "xla":  # the [B * P, V] cross-entropy as XLA passes
        mlm_ce = ops.reshape(cross_entropy.sparse_softmax_cross_entropy(
            ops.reshape(ids, (-1,)), ops.reshape(logits, (-1, ops.shape(logits)[-1]))), ops.shape(ids))
    else:
        mlm_ce = keras.losses.sparse_categorical_crossentropy(ids, logits, from_logits=True)
    nsp_ce = keras.losses.sparse_categorical_crossentropy(nsp_label, nsp_logits, from_logits=True)
    # a prediction is correct where the target's logit is the row's largest (one max pass over
    # the [B, P, V] logits: Keras' argmax on TensorFlow takes four, 25 vs 2.7 ms at [32, 19, 30522])
    mlm_hit = target_is_largest(logits, ids)
    nsp_hit = target_is_largest(nsp_logits, nsp_label)
    terms = {
        "mlm_sum": ops.sum(mlm_ce * weights),
        "mlm_count": ops.sum(weights),
        "mlm_correct": ops.sum(mlm_hit * weights),
        "nsp_sum": ops.sum(nsp_ce),
        "nsp_count": ops.cast(ops.size(nsp_ce), "float32"),
        "nsp_correct": ops.sum(nsp_hit),
    }
    if hits:
        terms["mlm_hit"] = mlm_hit
    return terms


def target_is_largest(logits, ids):
    """1.0 where the target's logit is the row's largest (a correct prediction), else 0.0: one max
    pass over the logits (an argmax takes several)."""
    picked = ops.take_along_axis(logits, ops.expand_dims(ids, -1), -1)[..., 0]
    return ops.cast(picked >= ops.max(logits, -1), "float32")


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
    metrics ``mlm_accuracy``, ``nsp_accuracy``, ``mlm_loss``, ``nsp_loss``; the terms are
    `pretraining_terms`.  On TensorFlow the step is `bert_keras.models.tensorflow_step`: under
    any ``tf.distribute`` strategy the loss and the clip are those of the global batch, and a
    batch of k micro-batches stacked on a leading axis is one optimiser step.

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

    def train_step(self, *args):
        """On TensorFlow, `bert_keras.models.tensorflow_step.train_step` (the global batch's loss and
        clip under any strategy, stacked micro-batches); elsewhere (JAX's step also takes the
        state), and with a compiled loss, Keras' own."""
        if keras.backend.backend() != "tensorflow" or _private_api.has_compiled_loss(self):
            return super().train_step(*args)
        from bert_keras.models import tensorflow_step

        (data,) = args
        return tensorflow_step.train_step(self, data)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if _private_api.has_compiled_loss(self) or y is None:
            return super().compute_loss(x, y, y_pred, sample_weight, training)
        t = pretraining_terms(y, y_pred, self.encoder.kernels)
        # Google's normalisation: sum over real targets / (count + 1e-5).  With gradient
        # accumulation over k micro-batches, ``mlm_denominator`` (per sequence, all equal) is
        # (total count of the k + 1e-5) / k: the mean of the k gradients is then the gradient
        # of one k-times larger batch, whatever each micro-batch's own count.
        if isinstance(y, dict) and "mlm_denominator" in y:
            denominator = ops.mean(ops.cast(y["mlm_denominator"], "float32"))
        else:
            denominator = t["mlm_count"] + 1e-5
        mlm_loss = t["mlm_sum"] / denominator
        nsp_loss = t["nsp_sum"] / t["nsp_count"]
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
