"""LayerNorm: `keras.layers.LayerNormalization` with a fused mixed-precision training path."""

import keras

def _fused_layer_norm_tf():
    """One XLA kernel for LayerNorm over the last axis (float32 statistics), forward and backward."""
    import tensorflow as tf

    from bert_keras.layers.fused import _compiled

    def fused(x, gamma, beta, epsilon):
        xf = tf.cast(x, tf.float32)
        mean, variance = tf.nn.moments(xf, axes=[-1], keepdims=True)
        y = (xf - mean) * tf.math.rsqrt(variance + epsilon) * gamma + beta
        return tf.cast(y, x.dtype)

    return _compiled("layer_norm", fused)


@keras.saving.register_keras_serializable(package="bert_keras")
class LayerNorm(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` (same arguments, weights ``gamma``/``beta``, results).

    Training in bfloat16/float16 on TensorFlow runs the normalisation (statistics in
    float32) as one XLA-fused kernel each way instead of about fifteen element-wise
    and reduction ops, each a pass over [B, L, H].  float32 models, inference and
    other backends run the Keras layer itself, so exports and float32 parity are
    unchanged.
    """

    def call(self, inputs, training=None):
        if (not training or keras.backend.backend() != "tensorflow" or self.compute_dtype == "float32"
                or self.rms_scaling or not (self.center and self.scale)
                or tuple(self.axis) not in ((-1,), (len(inputs.shape) - 1,))):
            return super().call(inputs)
        return _fused_layer_norm_tf()(inputs, self.gamma.value, self.beta.value, self.epsilon)
