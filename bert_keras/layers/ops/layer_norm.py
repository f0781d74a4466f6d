"""LayerNorm over the last axis: the plain math and its fast variants, side by side.

`layer_norm` is the reference (keras.ops, statistics in float32, the numbers of
`keras.layers.LayerNormalization`); the variants compute the same normalisation:

- `layer_norm_xla`: 16-bit training on TensorFlow, one XLA kernel each way instead of about
  fifteen element-wise and reduction ops, each a pass over [B, L, H];
- `dropout_residual_layer_norm`: LN(residual + Dropout(h)), the end of both halves of a block,
  with its backward written out;
- `embeddings_layer_norm_dropout`: Dropout(LN(token + segment + position));
- `layer_norm_onednn`: bf16 inference, oneDNN's layer normalisation;
- `scaled_layer_norm`: LN of a residual stream stored rescaled per channel (full-integer TFLite).

The XLA variants share one TensorFlow spelling of the math (`_normalize_tf`).
"""

import numpy as np
from keras import ops

from bert_keras.layers.ops.dropout import apply_mask
from bert_keras.layers.ops.xla import compiled


def layer_norm(x, gamma, beta, epsilon):
    """(x - mean) / sqrt(var + epsilon) * gamma + beta over the last axis, statistics in float32,
    the result in x's dtype: the reference of every variant here."""
    xf = ops.cast(x, "float32")
    mean = ops.mean(xf, axis=-1, keepdims=True)
    variance = ops.mean(ops.square(xf - mean), axis=-1, keepdims=True)
    y = (xf - mean) * ops.rsqrt(variance + epsilon) * ops.cast(gamma, "float32") + ops.cast(beta, "float32")
    return ops.cast(y, x.dtype)


def _normalize_tf(x, gamma, beta, epsilon):
    """`layer_norm` in TensorFlow ops, for the XLA kernels: (y in x's dtype, mean, rstd)."""
    import tensorflow as tf

    xf = tf.cast(x, tf.float32)
    mean, variance = tf.nn.moments(xf, axes=[-1], keepdims=True)
    rstd = tf.math.rsqrt(variance + epsilon)
    y = (xf - mean) * rstd * tf.cast(gamma, tf.float32) + tf.cast(beta, tf.float32)
    return tf.cast(y, x.dtype), mean, rstd


def _layer_norm_tf(x, gamma, beta, epsilon):
    return _normalize_tf(x, gamma, beta, epsilon)[0]


def layer_norm_xla(x, gamma, beta, epsilon):
    """`layer_norm` as one XLA kernel forward and one backward (TensorFlow)."""
    return compiled("layer_norm", _layer_norm_tf)(x, gamma, beta, epsilon)


def dropout_residual_layer_norm(h, residual, bits, threshold, scale, gamma, beta, epsilon):
    """LN(residual + Dropout(h)): the end of both halves of a post-LN block.  [.., H] -> [.., H].

    The gradient is written out (`_layer_norm_backward`) so that the sums over tokens for
    gamma and beta run as TensorFlow reductions, not as the XLA CPU reductions over the
    token axis that autodiff of the XLA function produces.
    """
    import tensorflow as tf

    def forward(h, residual, bits, threshold, scale, gamma, beta, epsilon):
        x = residual + apply_mask(h, bits, threshold, scale)
        y, mean, rstd = _normalize_tf(x, gamma, beta, epsilon)
        return y, x, mean, rstd

    @tf.custom_gradient
    def fn(h, residual, gamma, beta):
        y, x, mean, rstd = compiled("dropout_residual_layer_norm", forward)(
            h, residual, bits, threshold, scale, gamma, beta, epsilon)

        def grad(dy):
            dh, dx, dgamma_terms = compiled("layer_norm_backward", _layer_norm_backward)(
                dy, x, mean, rstd, gamma, bits, threshold, scale)
            axes = tf.range(tf.rank(dy) - 1)
            dgamma = tf.reduce_sum(dgamma_terms, axes)
            dbeta = tf.reduce_sum(tf.cast(dy, tf.float32), axes)
            return dh, dx, tf.cast(dgamma, gamma.dtype), tf.cast(dbeta, beta.dtype)

        return y, grad

    return fn(h, residual, gamma, beta)


def _layer_norm_backward(dy, x, mean, rstd, gamma, bits, threshold, scale):
    """Gradients of `dropout_residual_layer_norm` for h and residual, and dy * x_hat (for gamma)."""
    import tensorflow as tf

    dyf = tf.cast(dy, tf.float32)
    xhat = (tf.cast(x, tf.float32) - mean) * rstd
    dxhat = dyf * tf.cast(gamma, tf.float32)
    dxf = rstd * (dxhat - tf.reduce_mean(dxhat, -1, keepdims=True)
                  - xhat * tf.reduce_mean(dxhat * xhat, -1, keepdims=True))
    dx = tf.cast(dxf, x.dtype)
    return apply_mask(dx, bits, threshold, scale), dx, dyf * xhat


def embeddings_layer_norm_dropout(token, segment, position, gamma, beta, epsilon, bits, threshold, scale):
    """Dropout(LN(token + segment + position)): the embedding sum.  [B, L, H] (position [L, H])."""

    def fn(token, segment, position, gamma, beta, epsilon, bits, threshold, scale):
        import tensorflow as tf

        x = token + segment + tf.cast(position, token.dtype)[None]
        return apply_mask(_layer_norm_tf(x, gamma, beta, epsilon), bits, threshold, scale)

    return compiled("embeddings_layer_norm_dropout", fn)(
        token, segment, position, gamma, beta, epsilon, bits, threshold, scale)


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
