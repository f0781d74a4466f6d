"""Activation lookup shared by the Transformer block and the MLM head."""

import keras
from keras import ops


def gelu(x):
    """Exact GELU, x * Phi(x) with the erf form (the paper; Hugging Face "gelu")."""
    return ops.gelu(x, approximate=False)


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
