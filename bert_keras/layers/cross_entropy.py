"""The MLM cross-entropy of pre-training as TensorFlow kernels (taken by
`bert_keras.models.pretrainer.pretraining_terms` where the kernel plan's ``loss`` is "xla")."""

from bert_keras.layers.ops.xla import compiled


def sparse_softmax_cross_entropy(labels, logits):
    """``tf.nn.sparse_softmax_cross_entropy_with_logits`` for float32 logits [N, V], labels int32 [N].

    Same values (within float32 rounding), less CPU time on the [N, V] MLM logits
    (docs/design.md, "Measured choices"): the row maximum is a TensorFlow reduction, the
    sum of exponentials and the gradient softmax - one_hot are one XLA-fused pass each.
    """
    import tensorflow as tf

    @tf.custom_gradient
    def cross_entropy(logits):
        row_max = tf.stop_gradient(tf.reduce_max(logits, -1))
        log_normaliser = tf.math.log(compiled("exp_sum", _exp_sum)(logits, row_max)) + row_max
        picked = tf.gather(logits, labels[:, None], batch_dims=1)[:, 0]

        def grad(upstream):
            return compiled("cross_entropy_gradient", _cross_entropy_gradient)(
                upstream, logits, log_normaliser, labels)

        return log_normaliser - picked, grad

    return cross_entropy(logits)


def _exp_sum(logits, row_max):
    import tensorflow as tf

    return tf.reduce_sum(tf.exp(logits - row_max[:, None]), -1)


def _cross_entropy_gradient(upstream, logits, log_normaliser, labels):
    import tensorflow as tf

    return upstream[:, None] * (tf.exp(logits - log_normaliser[:, None])
                                - tf.one_hot(labels, tf.shape(logits)[-1], dtype=logits.dtype))
