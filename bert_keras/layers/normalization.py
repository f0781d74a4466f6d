"""LayerNorm: `keras.layers.LayerNormalization` with a fused mixed-precision training path."""

import keras
import numpy as np
from keras import ops

from bert_keras.layers import fused


@keras.saving.register_keras_serializable(package="bert_keras")
class LayerNorm(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` (same arguments, weights ``gamma``/``beta``, results).

    ``kernels`` (`bert_keras.layers.fused.KERNELS`, default "auto"): training in
    bfloat16/float16 on TensorFlow, where `fused.use_fused` allows it, runs the normalisation
    (statistics in float32) as one XLA-fused kernel each way instead of about fifteen
    element-wise and reduction ops, each a pass over [B, L, H]; bf16 inference with oneDNN
    runs oneDNN's layer normalisation (`fused.layer_norm_onednn`).  float32 models and other
    backends run the Keras layer itself, so exports and float32 parity are unchanged.
    """

    def __init__(self, kernels="auto", **kwargs):
        super().__init__(**kwargs)
        self.kernels = fused.check_kernels(kernels)
        # (s_in, s_out) per-channel residual-stream scales, set only on the copy of a model
        # that a full-integer TFLite export traces (`bert_keras.export.residual_scaling`).
        self.stream_scales = None

    def call(self, inputs, training=None):
        if self.stream_scales is not None:
            return scaled_layer_norm(inputs, self.gamma, self.beta, self.epsilon, *self.stream_scales)
        standard = (not self.rms_scaling and self.center and self.scale
                    and tuple(self.axis) in ((-1,), (len(inputs.shape) - 1,)))
        if standard and training and fused.use_fused(self.kernels, self.compute_dtype):
            return fused.layer_norm(inputs, self.gamma.value, self.beta.value, self.epsilon)
        if standard and not training and fused.use_onednn_bf16(self.kernels, self.compute_dtype):
            return fused.layer_norm_onednn(ops.cast(inputs, self.compute_dtype), self.gamma.value,
                                           self.beta.value, self.epsilon)
        return super().call(inputs)

    def get_config(self):
        return {**super().get_config(), "kernels": self.kernels}


def scaled_layer_norm(z, gamma, beta, epsilon, s_in, s_out):
    """LN(z * s_in) / s_out computed from z without forming z * s_in (s_in, s_out: per-channel
    float32 [H] or None for 1), for the residual stream stored rescaled
    (`bert_keras.export.residual_scaling`, which has the formulas)."""
    h = int(z.shape[-1])
    dtype = z.dtype
    s_in = np.ones(h, np.float32) if s_in is None else np.asarray(s_in, np.float32)
    s_out = np.ones(h, np.float32) if s_out is None else np.asarray(s_out, np.float32)
    outliers = np.flatnonzero(s_in > 1.0).astype(np.int32)

    def channel_sum(t, outlier_weights):
        """sum over the channels of t, plus sum over the outlier channels of t_o * outlier_weights_o."""
        out = ops.sum(t, axis=-1, keepdims=True)
        if len(outliers):
            picked = ops.take(t, outliers, axis=-1) * ops.cast(outlier_weights[outliers], dtype)
            out = out + ops.sum(picked, axis=-1, keepdims=True)
        return out

    mean = channel_sum(z, s_in - 1.0) / h
    centred = z - mean * ops.cast(1.0 / s_in, dtype)
    squared = centred * centred
    var = channel_sum(squared, s_in * s_in - 1.0) / h
    rstd = ops.rsqrt(var + epsilon)
    scale = ops.cast(gamma, dtype) * ops.cast(s_in / s_out, dtype)
    return centred * rstd * scale + ops.cast(beta, dtype) * ops.cast(1.0 / s_out, dtype)
