"""Activation lookup shared by the Transformer block and the MLM head."""

import keras
from keras import ops


def gelu(x, fused_kernel=False):
    """Exact GELU, x * Phi(x) with the erf form (the paper; Hugging Face "gelu").

    float32 inputs take `keras.ops.gelu`.  bfloat16/float16 inputs are computed in
    float32: on CPU, element-wise bf16 math is emulated, and the erf form's ten
    element-wise ops (forward and autodiff backward, one pass over [B, L, 4H] each)
    dominate a bf16 step otherwise.  With ``fused_kernel`` (TensorFlow; the layers pass
    `fused.use_fused`, false for packed tokens, whose shapes change with every batch and
    would compile an XLA kernel each), the forward and a hand-written backward are one XLA
    loop each (`fused.gelu`); otherwise a hand-written gradient reuses the forward's Phi(x).
    """
    if keras.backend.standardize_dtype(x.dtype) == "float32":
        return ops.gelu(x, approximate=False)
    if fused_kernel:
        from bert_keras.layers import fused

        return fused.gelu(x)
    return _gelu_in_float32(x)


def _normal_cdf(x):
    """Phi(x), the standard normal CDF (erf form)."""
    return 0.5 * (1.0 + ops.erf(x * 0.7071067811865476))


def _normal_pdf(x):
    """phi(x), the standard normal density."""
    return ops.exp(-0.5 * ops.square(x)) * 0.3989422804014327


@ops.custom_gradient
def _gelu_in_float32(x):
    xf = ops.cast(x, "float32")
    cdf = _normal_cdf(xf)

    def grad(*args, upstream=None):
        upstream = args[0] if upstream is None else upstream
        return ops.cast(ops.cast(upstream, "float32") * (cdf + xf * _normal_pdf(xf)), x.dtype)

    return ops.cast(xf * cdf, x.dtype), grad


def gelu_approximate(x):
    """tanh approximation of GELU (Hugging Face "gelu_new")."""
    return ops.gelu(x, approximate=True)


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_approximate": gelu_approximate,
    "gelu_new": gelu_approximate,
    "gelu_pytorch_tanh": gelu_approximate,
    "relu": keras.activations.relu,
    "silu": keras.activations.silu,
    "swish": keras.activations.silu,
    "tanh": keras.activations.tanh,
}


def get_activation(name: str):
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(_ACTIVATIONS)}") from None


def activate(name, x, fused_kernel=False):
    """The activation ``name`` of x; the exact GELU takes ``fused_kernel`` (see `gelu`)."""
    if _ACTIVATIONS.get(name) is gelu:
        return gelu(x, fused_kernel)
    return get_activation(name)(x)
