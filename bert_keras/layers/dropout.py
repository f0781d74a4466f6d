"""Dropout: `keras.layers.Dropout` with cheaper random bits in TensorFlow training."""

import keras

from bert_keras.layers import plan
from bert_keras.layers.ops import dropout as dropout_ops
from bert_keras.layers.ops.dropout import keep_threshold, random_bits_tf  # noqa: F401 - the mask rule, named here too


@keras.saving.register_keras_serializable(package="bert_keras")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` (same arguments, random state and semantics).

    ``kernels`` (`bert_keras.layers.plan.KERNELS`, default "auto"): where the kernel plan's
    ``dropout`` is "bits16" (TensorFlow training in any dtype), a call without ``noise_shape``
    takes `ops.dropout.dropout_tf`: the keep
    probability is 1 - rate to within 2^-17 (16-bit random draws), kept
    values are scaled by 1 / (1 - rate).  Inference is the identity, as in Keras;
    elsewhere the Keras layer runs.
    """

    def __init__(self, rate, noise_shape=None, seed=None, kernels="auto", **kwargs):
        super().__init__(rate, noise_shape=noise_shape, seed=seed, **kwargs)
        self.kernels = plan.check_kernels(kernels)

    def call(self, inputs, training=False):
        if (0.0 < self.rate < 1.0 and self.noise_shape is None
                and plan.current_plan(self.kernels, self.compute_dtype, training).dropout == "bits16"):
            return dropout_ops.dropout_tf(inputs, self.rate, self.seed_generator.next())
        return super().call(inputs, training=training)

    def get_config(self):
        return {**super().get_config(), "kernels": self.kernels}
