"""LayerNorm: `keras.layers.LayerNormalization` with a fused mixed-precision training path."""

import keras

from bert_keras.layers import fused


@keras.saving.register_keras_serializable(package="bert_keras")
class LayerNorm(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` (same arguments, weights ``gamma``/``beta``, results).

    Training in bfloat16/float16 on TensorFlow runs the normalisation (statistics in
    float32) as one XLA-fused kernel each way instead of about fifteen element-wise
    and reduction ops, each a pass over [B, L, H].  float32 models, inference and
    other backends run the Keras layer itself, so exports and float32 parity are
    unchanged.
    """

    # (s_in, s_out) per-channel residual-stream scales, set only while exporting full-integer
    # TFLite (`bert_keras.export.residual_scaling`); never part of the config.
    stream_scales = None

    def call(self, inputs, training=None):
        if self.stream_scales is not None:
            from bert_keras.export.residual_scaling import scaled_layer_norm

            return scaled_layer_norm(inputs, self.gamma, self.beta, self.epsilon, *self.stream_scales)
        if (fused.use_fused_training(self, training) and not self.rms_scaling and self.center and self.scale
                and tuple(self.axis) in ((-1,), (len(inputs.shape) - 1,))):
            return fused.layer_norm(inputs, self.gamma.value, self.beta.value, self.epsilon)
        return super().call(inputs)
