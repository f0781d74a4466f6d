"""The exact GELU, x * Phi(x) with the erf form: the plain math and its fast variants.

`gelu` is the reference (the paper; Hugging Face "gelu"): `keras.ops.gelu` in float32, and for
bfloat16/float16 inputs the same math in float32 with a hand-written gradient that reuses the
forward's Phi(x) (on CPU element-wise bf16 math is emulated, and the erf form's ten
element-wise ops forward and backward dominate a bf16 step otherwise).  The variants:

- `gelu_xla`: 16 bits on TensorFlow, the forward and the written-out backward one XLA loop each;
- `dense_gelu`: GELU(x W + b) as one oneDNN matmul with the GELU as a post-op (bf16 inference).

Phi and phi are written once (`normal_cdf`, `normal_pdf`), in keras.ops, for every variant.
"""

import keras
from keras import ops

from bert_keras.layers.ops.xla import compiled


def normal_cdf(x):
    """Phi(x), the standard normal CDF (erf form)."""
    return 0.5 * (1.0 + ops.erf(x * 0.7071067811865476))


def normal_pdf(x):
    """phi(x), the standard normal density."""
    return ops.exp(-0.5 * ops.square(x)) * 0.3989422804014327


def _gradient(x, dy):
    """dy * d/dx x Phi(x) = dy * (Phi(x) + x phi(x)), in float32, the result in x's dtype."""
    xf = ops.cast(x, "float32")
    return ops.cast(ops.cast(dy, "float32") * (normal_cdf(xf) + xf * normal_pdf(xf)), x.dtype)


def gelu(x):
    """Exact GELU; float32 inside for 16-bit inputs, with a hand-written gradient."""
    if keras.backend.standardize_dtype(x.dtype) == "float32":
        return ops.gelu(x, approximate=False)
    return _gelu_in_float32(x)


@ops.custom_gradient
def _gelu_in_float32(x):
    xf = ops.cast(x, "float32")
    cdf = normal_cdf(xf)

    def grad(*args, upstream=None):
        upstream = args[0] if upstream is None else upstream
        return ops.cast(ops.cast(upstream, "float32") * (cdf + xf * normal_pdf(xf)), x.dtype)

    return ops.cast(xf * cdf, x.dtype), grad


def _forward(x):
    """x Phi(x) in float32, the result in x's dtype.  The erf form, not `tf.nn.gelu`, which takes
    Phi from erfc: on XLA's CPU backend erfc costs an exp besides, and the forward loop ran 2.0x
    slower on [32, 128, 2048] bf16 (8.05 vs 4.0 ms) for the same bf16 results but for 152 of 8.4
    million values, each within 2e-6."""
    xf = ops.cast(x, "float32")
    return ops.cast(xf * normal_cdf(xf), x.dtype)


def gelu_xla(x):
    """`gelu` of a 16-bit TensorFlow tensor, one XLA kernel forward and one backward.

    The gradient is written out as one XLA kernel (`_gradient`): autodiff of the XLA forward
    gives a backward of several passes instead of one.
    """
    import tensorflow as tf

    @tf.custom_gradient
    def fn(x):
        def grad(dy):
            return compiled("gelu_backward", _gradient)(x, dy)

        return compiled("gelu", _forward)(x), grad

    return fn(x)


def dense_gelu(x, kernel, bias):
    """GELU(x W + b), exact (erf form), for 16-bit inference on TensorFlow with oneDNN.

    Written as MatMul, BiasAdd and Gelu on 2-D rows, the pattern TensorFlow's graph
    remapper fuses into one oneDNN matmul with its bias and GELU as post-ops (computed in
    float32 inside the kernel, rounded once to x's dtype).  The plain path casts [.., 4H]
    to float32 and back around ten element-wise ops, each a pass in emulated bf16.  Where
    the pattern is not fused (no oneDNN), TensorFlow's bf16 GELU is slow: the plan's
    ``ffn`` choice says when to call this.
    """
    import tensorflow as tf

    w = tf.cast(kernel, x.dtype)
    rows = tf.reshape(x, [-1, tf.shape(x)[-1]])
    y = tf.nn.gelu(tf.nn.bias_add(tf.matmul(rows, w), tf.cast(bias, x.dtype)), approximate=False)
    return tf.reshape(y, tf.concat([tf.shape(x)[:-1], tf.shape(w)[-1:]], 0))
