"""Activation lookup shared by the Transformer block and the MLM head.

`_ACTIVATIONS` is the table of the names a config may give, written once here
(``bert_keras.config.ACTIVATIONS`` is `activation_names`).  "gelu" is the exact erf form (the
paper, Hugging Face "gelu"); the tanh approximation has its own names.  The exact GELU's math is
in `ops.gelu`.
"""

import keras
from keras import ops

from bert_keras.layers.ops import gelu as gelu_ops


def gelu(x, fused_kernel=False):
    """Exact GELU, x * Phi(x) with the erf form (the paper; Hugging Face "gelu").

    `ops.gelu.gelu` (float32 inside for 16-bit inputs, a hand-written gradient); with
    ``fused_kernel`` (the kernel plan's ``gelu`` "xla": 16 bits on TensorFlow, padded tokens)
    a 16-bit input takes `ops.gelu.gelu_xla`, one XLA loop each way.
    """
    if fused_kernel and keras.backend.standardize_dtype(x.dtype) != "float32":
        return gelu_ops.gelu_xla(x)
    return gelu_ops.gelu(x)


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


def activation_names() -> tuple:
    """The names a config may give, in the table's order."""
    return tuple(_ACTIVATIONS)


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
