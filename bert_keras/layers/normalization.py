"""LayerNorm: `keras.layers.LayerNormalization` with a fused mixed-precision training path."""

import keras
import numpy as np
from keras import ops

from bert_keras.layers import plan
from bert_keras.layers.ops import layer_norm as layer_norm_ops
from bert_keras.layers.ops.layer_norm import scaled_layer_norm  # noqa: F401 - named here too


@keras.saving.register_keras_serializable(package="bert_keras")
class LayerNorm(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` (same arguments, weights ``gamma``/``beta``, results).

    ``kernels`` (`bert_keras.layers.plan.KERNELS`, default "auto"): training in
    bfloat16/float16 on TensorFlow, where the kernel plan chooses "xla", runs the normalisation
    (statistics in float32) as one XLA-fused kernel each way instead of about fifteen
    element-wise and reduction ops, each a pass over [B, L, H]; bf16 inference with oneDNN
    runs oneDNN's layer normalisation (`ops.layer_norm.layer_norm_onednn`).  float32 models and other
    backends run the Keras layer itself, so exports and float32 parity are unchanged.

    ``stream_scales`` (s_in, s_out), per-channel float32 [H] or None for 1: the layer reads a
    residual stream stored divided by s_in and writes its output divided by s_out
    (`ops.layer_norm.scaled_layer_norm`); an option of the copy of a model that a full-integer
    TFLite export traces (`bert_keras.export.residual_scaling.rescaled_copy`), None otherwise.
    """

    def __init__(self, kernels="auto", stream_scales=None, **kwargs):
        super().__init__(**kwargs)
        self.kernels = plan.check_kernels(kernels)
        self.stream_scales = _scales_pair(stream_scales)

    def call(self, inputs, training=None):
        if self.stream_scales is not None:
            return layer_norm_ops.scaled_layer_norm(inputs, self.gamma, self.beta, self.epsilon, *self.stream_scales)
        standard = (not self.rms_scaling and self.center and self.scale
                    and tuple(self.axis) in ((-1,), (len(inputs.shape) - 1,)))
        choice = plan.current_plan(self.kernels, self.compute_dtype, training).layer_norm if standard else "keras"
        if choice == "xla":
            return layer_norm_ops.layer_norm_xla(inputs, self.gamma.value, self.beta.value, self.epsilon)
        if choice == "onednn":
            return layer_norm_ops.layer_norm_onednn(ops.cast(inputs, self.compute_dtype), self.gamma.value,
                                           self.beta.value, self.epsilon)
        return super().call(inputs)

    def get_config(self):
        config = {**super().get_config(), "kernels": self.kernels}
        if self.stream_scales is not None:
            config["stream_scales"] = [None if s is None else s.tolist() for s in self.stream_scales]
        return config


def _scales_pair(stream_scales):
    """(s_in, s_out) as float32 arrays or None each; None for no scales."""
    if stream_scales is None:
        return None
    s_in, s_out = stream_scales
    return tuple(None if s is None else np.asarray(s, np.float32) for s in (s_in, s_out))
