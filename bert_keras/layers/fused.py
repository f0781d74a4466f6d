"""Kernels the layers compose on TensorFlow: the XLA-fused stages of a mixed-precision
(bf16/fp16) training step, and oneDNN's kernels for bf16 inference.

Between two matmuls, a BERT block runs chains of element-wise ops: dropout, residual
add and LayerNorm; the attention softmax with its mask, casts and dropout; the Q/K/V
split and head transposes.  On CPU each op is a separate pass
over a [B, L, *] tensor in emulated bf16, plus executor overhead, and their gradients
as many again: together they cost more than the matmuls.  Each function here is one
``tf.function(jit_compile=True)``, so XLA fuses the chain into one kernel forward and
one backward (TensorFlow compiles the gradient of an XLA function with XLA too).
The matmuls and their bias adds stay outside, in oneDNN and TensorFlow kernels: XLA's CPU
matmuls and its CPU reductions over the token axis (a bias gradient) are slower than
TensorFlow's (docs/design.md, "Measured choices").

Each kernel is a function of tensors; the layers' ``call`` methods compose them in place
of the matching lines of their plain keras.ops math (the block, attention, embeddings and
heads are written once, in their layers).  A layer takes them where `use_fused` says so for
its ``kernels`` option: the training path of bf16/fp16 models on TensorFlow, plus dropout
masks and the 16-bit GELU; for bf16 inference, oneDNN's dense, GELU, LayerNorm and softmax
kernels (`dense_rows`, `dense_gelu`, `layer_norm_onednn`, `masked_softmax`); where bf16
matmuls are emulated, the float32 MLM projection (`tied_logits_float32`).  float32 models
and the other backends run the plain math, so their numbers are untouched.  Rounding
follows the plain path: dropout and residual adds in the compute dtype, LayerNorm statistics,
GELU and softmax in float32.  Dropout masks come from `random_bits_tf` (drawn outside, applied inside); `dropout_tf`, the
`bert_keras.layers.Dropout` training path, applies them the same way.
"""

import keras

from bert_keras import _private_api

_CACHE = {}

# The values of the layers' ``kernels`` option.
#   "auto"   the kernels here where they were measured to help: TensorFlow on a CPU;
#   "fused"  the kernels here on any TensorFlow device;
#   "plain"  keras.ops only (each layer's reference math; the path on JAX and torch).
# Whatever the option, none of them runs inside a function being compiled whole by XLA
# (`Model.compile(jit_compile=True)`): XLA then sees the plain graph and fuses it itself.
# Nested XLA functions there made each step recompile, 10x slower, memory growing per call.
KERNELS = ("auto", "fused", "plain")


def check_kernels(kernels):
    """``kernels`` if it is one of `KERNELS`, else a one-line ValueError."""
    if kernels not in KERNELS:
        raise ValueError(f"kernels={kernels!r}; choose one of {', '.join(KERNELS)}")
    return kernels


def use_fused(kernels, dtype=None) -> bool:
    """Whether a layer with option ``kernels`` composes the TensorFlow kernels here in the call
    being traced: TensorFlow backend, not inside an XLA compile, "auto" only without a GPU,
    and (when ``dtype`` is given) a 16-bit compute dtype.  The caller adds its own conditions
    (training, additive masking, unpacked tokens)."""
    if kernels == "plain" or keras.backend.backend() != "tensorflow":
        return False
    if dtype is not None and keras.backend.standardize_dtype(dtype) not in ("bfloat16", "float16"):
        return False
    if _private_api.in_xla_compile():
        return False
    return kernels == "fused" or not _gpu_visible()


def _gpu_visible() -> bool:
    if "gpu" not in _CACHE:
        import tensorflow as tf

        _CACHE["gpu"] = bool(tf.config.list_logical_devices("GPU"))
    return _CACHE["gpu"]


# ---------------------------------------------------------------------------
# The kernels (tensors in, tensors out; the layers compose them)


def layer_norm(x, gamma, beta, epsilon):
    """`LayerNorm` over the last axis, float32 statistics, as one XLA kernel forward and backward."""
    return _compiled("layer_norm", _layer_norm)(x, gamma, beta, epsilon)


def gelu(x):
    """Exact GELU of a 16-bit tensor computed in float32, one XLA kernel forward and one backward
    (`layers.activations.gelu` is the reference and chooses this path)."""
    import tensorflow as tf

    def cdf(x):  # Phi(x), the erf form
        return 0.5 * (1.0 + tf.math.erf(x * 0.7071067811865476))

    def forward(x):
        return tf.cast(tf.nn.gelu(tf.cast(x, tf.float32), approximate=False), x.dtype)

    def backward(x, dy):  # d/dx x Phi(x) = Phi(x) + x phi(x), in float32
        xf = tf.cast(x, tf.float32)
        pdf = tf.exp(-0.5 * tf.square(xf)) * 0.3989422804014327
        return tf.cast(tf.cast(dy, tf.float32) * (cdf(xf) + xf * pdf), x.dtype)

    # The gradient written out as one XLA kernel: autodiff of the XLA forward gives a
    # backward of several passes instead of one.
    @tf.custom_gradient
    def fn(x):
        def grad(dy):
            return _compiled("gelu_backward", backward)(x, dy)

        return _compiled("gelu", forward)(x), grad

    return fn(x)


# ---------------------------------------------------------------------------
# The XLA-compiled stages


def _compiled(name, fn):
    if name not in _CACHE:
        import tensorflow as tf

        _CACHE[name] = tf.function(fn, jit_compile=True, reduce_retracing=True)
    return _CACHE[name]


# Random bits per element: a kept element is one whose 16 random bits are >= round(rate * 2^16),
# so the keep probability is 1 - rate to within 2^-17.
_BITS = 16


def keep_threshold(rate):
    """The uint16 threshold for ``rate``: P(bits >= threshold) = 1 - threshold / 2^16."""
    return int(round(rate * (1 << _BITS)))


def random_bits_tf(shape, seed):
    """uint16 random bits of ``shape`` from one stateless Philox uint32 draw per two elements."""
    import tensorflow as tf

    size = tf.reduce_prod(shape)
    words = tf.random.stateless_uniform([(size + 1) // 2], seed, minval=None, maxval=None, dtype=tf.uint32)
    bits = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]
    return tf.reshape(bits, shape)


def dropout_tf(x, rate, seed):
    """Inverted dropout of a TensorFlow tensor: keep with probability 1 - rate, scale 1 / (1 - rate).

    Same semantics as `tf.nn.experimental.stateless_dropout` (what Keras runs), but
    the mask comes from 16 random bits per element (one Philox uint32 per two
    elements instead of one per element plus a conversion to float), and the
    compare, select and scale are one XLA-fused pass forward and one backward
    instead of three ops each way (timings: docs/design.md).
    """
    import tensorflow as tf

    bits = random_bits_tf(tf.shape(x), seed)
    return _compiled("dropout_apply", _dropout)(x, bits, tf.constant(keep_threshold(rate), tf.uint16),
                                                tf.constant(1.0 / (1.0 - rate), tf.float32))


def _dropout(x, bits, threshold, scale):
    import tensorflow as tf

    if bits is None:
        return x
    return tf.where(bits >= threshold, x * tf.cast(scale, x.dtype), tf.zeros_like(x))


def _layer_norm(x, gamma, beta, epsilon):
    import tensorflow as tf

    xf = tf.cast(x, tf.float32)
    mean, variance = tf.nn.moments(xf, axes=[-1], keepdims=True)
    y = (xf - mean) * tf.math.rsqrt(variance + epsilon) * tf.cast(gamma, tf.float32) + tf.cast(beta, tf.float32)
    return tf.cast(y, x.dtype)


def dropout_mask_args(dropout_layer, shape):
    """(bits, threshold, scale) for applying `dropout_layer` inside a fused function; bits None at rate 0."""
    import tensorflow as tf

    rate = dropout_layer.rate
    if rate <= 0.0:
        return None, tf.constant(0, tf.uint16), tf.constant(1.0, tf.float32)
    bits = random_bits_tf(shape, dropout_layer.seed_generator.next())
    return bits, tf.constant(keep_threshold(rate), tf.uint16), tf.constant(1.0 / (1.0 - rate), tf.float32)


def dropout_residual_layer_norm(h, residual, bits, threshold, scale, gamma, beta, epsilon):
    """LN(residual + Dropout(h)): the end of both halves of a post-LN block.  [.., H] -> [.., H].

    The gradient is written out (`_layer_norm_backward`) so that the sums over tokens for
    gamma and beta run as TensorFlow reductions, not as the XLA CPU reductions over the
    token axis that autodiff of the XLA function produces.
    """
    import tensorflow as tf

    def forward(h, residual, bits, threshold, scale, gamma, beta, epsilon):
        x = residual + _dropout(h, bits, threshold, scale)
        xf = tf.cast(x, tf.float32)
        mean, variance = tf.nn.moments(xf, axes=[-1], keepdims=True)
        rstd = tf.math.rsqrt(variance + epsilon)
        y = (xf - mean) * rstd * tf.cast(gamma, tf.float32) + tf.cast(beta, tf.float32)
        return tf.cast(y, x.dtype), x, mean, rstd

    @tf.custom_gradient
    def layer_norm(h, residual, gamma, beta):
        y, x, mean, rstd = _compiled("dropout_residual_layer_norm", forward)(
            h, residual, bits, threshold, scale, gamma, beta, epsilon)

        def grad(dy):
            dh, dx, dgamma_terms = _compiled("layer_norm_backward", _layer_norm_backward)(
                dy, x, mean, rstd, gamma, bits, threshold, scale)
            axes = tf.range(tf.rank(dy) - 1)
            dgamma = tf.reduce_sum(dgamma_terms, axes)
            dbeta = tf.reduce_sum(tf.cast(dy, tf.float32), axes)
            return dh, dx, tf.cast(dgamma, gamma.dtype), tf.cast(dbeta, beta.dtype)

        return y, grad

    return layer_norm(h, residual, gamma, beta)


def _layer_norm_backward(dy, x, mean, rstd, gamma, bits, threshold, scale):
    """Gradients of `dropout_residual_layer_norm` for h and residual, and dy * x_hat (for gamma)."""
    import tensorflow as tf

    dyf = tf.cast(dy, tf.float32)
    xhat = (tf.cast(x, tf.float32) - mean) * rstd
    dxhat = dyf * tf.cast(gamma, tf.float32)
    dxf = rstd * (dxhat - tf.reduce_mean(dxhat, -1, keepdims=True)
                  - xhat * tf.reduce_mean(dxhat * xhat, -1, keepdims=True))
    dx = tf.cast(dxf, x.dtype)
    return _dropout(dx, bits, threshold, scale), dx, dyf * xhat


def qkv_heads(qkv, num_heads, query_scale):
    """[B, L, 3H] fused projection -> q, k, v [B, N, L, D]; q scaled by query_scale."""

    def fn(qkv, num_heads, query_scale):
        import tensorflow as tf

        shape = tf.shape(qkv)
        q, k, v = (tf.transpose(tf.reshape(part, [shape[0], shape[1], num_heads, -1]), [0, 2, 1, 3])
                   for part in tf.split(qkv, 3, axis=-1))
        return q * tf.cast(query_scale, q.dtype), k, v

    return _compiled("qkv_heads", fn)(qkv, num_heads, query_scale)


def masked_softmax_dropout(scores, attention_bias, bits, threshold, scale):
    """Dropout(softmax(scores + bias)) in scores' dtype.  scores [B, N, Lq, Lk], bias [B, 1, 1, Lk].

    The softmax is TensorFlow's: with oneDNN (see `_onednn`) on bf16 scores,
    which computes max, exp and sum in float32 and rounds the probabilities once (the same
    numbers as casting to float32 first); otherwise on float32 scores.  XLA's exp and its
    reductions over the keys were twice as slow at 512 tokens.  The dropout and the backward
    pass, ``p * (g - sum(g * p))`` in float32 with ``g`` the gradient after dropout, are one
    XLA kernel each.
    """
    import tensorflow as tf

    @tf.custom_gradient
    def fn(scores):
        probs = masked_softmax(scores, attention_bias)
        out = probs if bits is None else _compiled("dropout_apply", _dropout)(probs, bits, threshold, scale)

        def grad(dy):
            return _compiled("softmax_dropout_backward", _softmax_dropout_backward)(
                dy, probs, bits, threshold, scale)

        return out, grad

    return fn(scores)


def masked_softmax(scores, attention_bias):
    """softmax(scores + bias) in scores' dtype, for `masked_softmax_dropout` and inference.

    With oneDNN (see `_onednn`) on bf16 scores, TensorFlow's softmax runs in oneDNN's kernel,
    which computes max, exp and sum in float32 and rounds the probabilities once: the same
    numbers as casting to float32 first, without the two casts of [B, N, Lq, Lk].
    """
    import tensorflow as tf

    if scores.dtype == tf.bfloat16 and _onednn():
        return tf.nn.softmax(scores + tf.cast(attention_bias, scores.dtype), axis=-1)
    logits = tf.cast(scores, tf.float32) + tf.cast(attention_bias, tf.float32)
    return tf.cast(tf.nn.softmax(logits, axis=-1), scores.dtype)


def dense_gelu(x, kernel, bias):
    """GELU(x W + b), exact (erf form), for 16-bit inference on TensorFlow with oneDNN.

    Written as MatMul, BiasAdd and Gelu on 2-D rows, the pattern TensorFlow's graph
    remapper fuses into one oneDNN matmul with its bias and GELU as post-ops (computed in
    float32 inside the kernel, rounded once to x's dtype).  The plain path casts [.., 4H]
    to float32 and back around ten element-wise ops, each a pass in emulated bf16.  Where
    the pattern is not fused (no oneDNN), TensorFlow's bf16 GELU is slow: `use_onednn_bf16`
    says when to call this.
    """
    import tensorflow as tf

    w = tf.cast(kernel, x.dtype)
    rows = tf.reshape(x, [-1, tf.shape(x)[-1]])
    y = tf.nn.gelu(tf.nn.bias_add(tf.matmul(rows, w), tf.cast(bias, x.dtype)), approximate=False)
    return tf.reshape(y, tf.concat([tf.shape(x)[:-1], tf.shape(w)[-1:]], 0))


def dense_rows(x, kernel, bias):
    """x W + b over the last axis, for 16-bit inference on TensorFlow with oneDNN.

    Written as a 1x1 convolution over the rows ([1, rows, 1, in] with a [1, 1, in, out]
    filter, then BiasAdd), which TensorFlow's remapper fuses into one oneDNN convolution:
    on an AMX CPU its kernel ran BERT's Q/K/V, attention-output and second FFN projections
    in bf16 1.25x faster than TensorFlow's oneDNN MatMul (docs/design.md, "Measured
    choices").  The same products and the same bf16 rounding of the sums; `use_onednn_bf16`
    says when to call this.
    """
    import tensorflow as tf

    w = tf.cast(kernel, x.dtype)
    rows = tf.reshape(x, [1, -1, 1, tf.shape(x)[-1]])
    y = tf.nn.bias_add(tf.nn.conv2d(rows, w[None, None], strides=1, padding="VALID"), tf.cast(bias, x.dtype))
    return tf.reshape(y, tf.concat([tf.shape(x)[:-1], tf.shape(w)[-1:]], 0))


def plain_dense(layer) -> bool:
    """Whether a `keras.layers.Dense` computes only x W + b (no activation, LoRA or
    quantisation), so that a kernel here may stand in for its call."""
    return (layer.use_bias and layer.activation is keras.activations.linear
            and not getattr(layer, "lora_enabled", False) and getattr(layer, "quantization_mode", None) is None)


def dense(layer, x, onednn):
    """``layer(x)``, or `dense_rows` with its weights where ``onednn`` (the caller's
    `use_onednn_bf16`) and the layer is `plain_dense`."""
    if onednn and plain_dense(layer):
        return dense_rows(x, layer.kernel.value, layer.bias.value)
    return layer(x)


def _bf16_fused(kernels, dtype) -> bool:
    return keras.backend.standardize_dtype(dtype) == "bfloat16" and use_fused(kernels, dtype)


def use_onednn_bf16(kernels, dtype) -> bool:
    """Whether the bf16 inference kernels that oneDNN runs apply (`dense_gelu`, `dense_rows`,
    `layer_norm_onednn`): `use_fused` allows the kernels, the compute dtype is bfloat16 and
    oneDNN runs it (see `_onednn`)."""
    return _bf16_fused(kernels, dtype) and _onednn()


def layer_norm_onednn(x, gamma, beta, epsilon):
    """LayerNorm over the last axis of a bf16 tensor, for inference with oneDNN.

    Written as FusedBatchNormV3 in training mode on x viewed as [1, rows, H, 1] (one channel
    per row, unit scale and zero offset), then gamma and beta: the pattern TensorFlow's graph
    remapper replaces by one oneDNN layer normalisation (_MklLayerNorm: statistics and the
    affine step in float32, the output rounded once; gamma and beta enter rounded to bf16).
    The plain path is a dozen element-wise ops and reductions, each a pass over [rows, H] in
    emulated bf16, plus a float32 round trip.  The remapper needs a row count known only at run
    time (a static one folds the unit scale into a constant): then, and on rank 2 or 3 inputs,
    it fuses; otherwise FusedBatchNormV3 still normalises in float32.  The raw op keeps
    BERT's epsilon (tf.nn.fused_batch_norm raises it to 1.001e-5).
    """
    import tensorflow as tf

    shape = tf.shape(x)
    rows = tf.reduce_prod(shape[:-1])
    empty = tf.constant([], tf.float32)
    y = tf.raw_ops.FusedBatchNormV3(
        x=tf.reshape(x, tf.stack([1, rows, shape[-1], 1])), scale=tf.ones(tf.reshape(rows, [1])),
        offset=tf.zeros(tf.reshape(rows, [1])), mean=empty, variance=empty, epsilon=epsilon,
        data_format="NCHW", is_training=True).y
    return tf.reshape(y, shape) * tf.cast(gamma, x.dtype) + tf.cast(beta, x.dtype)


def tied_logits_float32(rows, table):
    """rows [N, H] (16-bit) times the float32 table [V, H] transposed: float32 logits [N, V].

    The tied MLM projection for CPUs whose bf16 matmuls do not run in oneDNN (no AVX-512,
    see `_onednn`): TensorFlow's emulated bf16 matmul then reaches a third of the float32 rate
    on these shapes (N the masked positions, V the vocabulary), and only the [V, H] x [H, N]
    layout runs at float32 speed.  So the product is taken in float32 as table x rows^T and
    transposed, and the gradients are float32 matmuls in their fastest layouts.  The table
    enters unrounded (rounding it to bf16 each step would cost more than the matmul saves),
    so the logits are closer to float32 than the plain path's, whose bf16 product is also
    rounded to bf16 before the float32 bias.
    """
    import tensorflow as tf

    @tf.custom_gradient
    def fn(rows, table):
        rows32 = tf.cast(rows, tf.float32)
        logits = tf.transpose(tf.matmul(table, rows32, transpose_b=True))

        def grad(dy):
            dy = tf.cast(dy, tf.float32)
            return tf.cast(tf.matmul(dy, table), rows.dtype), tf.matmul(dy, rows32, transpose_a=True)

        return logits, grad

    return fn(rows, table)


def use_tied_logits_float32(kernels, dtype) -> bool:
    """Whether `tied_logits_float32` applies: `use_fused` allows the kernels, the compute dtype
    is bfloat16 and oneDNN does not run bf16 matmuls (see `_onednn`)."""
    return _bf16_fused(kernels, dtype) and not _onednn()


def _onednn():
    """Whether a bf16 softmax runs in oneDNN's float32-accumulating kernel: TensorFlow's oneDNN
    kernels are on (x86 builds, unless TF_ENABLE_ONEDNN_OPTS=0) and the CPU has AVX-512
    (oneDNN's bf16 kernels need avx512_core; on an AVX2-only CPU TensorFlow's own bf16 softmax
    runs instead, 4% off float32 on small probabilities)."""
    if "onednn" not in _CACHE:
        _CACHE["onednn"] = _private_api.onednn_enabled() and avx512_core()
    return _CACHE["onednn"]


def avx512_core() -> bool:
    """Whether the CPU has oneDNN's avx512_core set (AVX-512 F, BW, DQ, VL); False where unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= set(flags)


def _softmax_dropout_backward(dy, probs, bits, threshold, scale):
    import tensorflow as tf

    g = tf.cast(_dropout(dy, bits, threshold, scale), tf.float32)
    p = tf.cast(probs, tf.float32)
    return tf.cast(p * (g - tf.reduce_sum(g * p, -1, keepdims=True)), dy.dtype)


def embeddings_layer_norm_dropout(token, segment, position, gamma, beta, epsilon, bits, threshold, scale):
    """Dropout(LN(token + segment + position)): the embedding sum.  [B, L, H] (position [L, H])."""

    def fn(token, segment, position, gamma, beta, epsilon, bits, threshold, scale):
        import tensorflow as tf

        x = token + segment + tf.cast(position, token.dtype)[None]
        return _dropout(_layer_norm(x, gamma, beta, epsilon), bits, threshold, scale)

    return _compiled("embeddings_layer_norm_dropout", fn)(
        token, segment, position, gamma, beta, epsilon, bits, threshold, scale)
