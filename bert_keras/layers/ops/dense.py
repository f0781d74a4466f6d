"""Dense projections: `keras.layers.Dense` is the plain one; here its oneDNN variants.

- `dense_rows`: x W + b as a oneDNN 1x1 convolution over the rows (bf16 inference);
- `tied_logits_float32`: the tied MLM projection in float32 (CPUs whose bf16 matmuls are emulated).
"""

import keras


def dense_rows(x, kernel, bias):
    """x W + b over the last axis, for 16-bit inference on TensorFlow with oneDNN.

    Written as a 1x1 convolution over the rows ([1, rows, 1, in] with a [1, 1, in, out]
    filter, then BiasAdd), which TensorFlow's remapper fuses into one oneDNN convolution:
    on an AMX CPU its kernel ran BERT's Q/K/V, attention-output and second FFN projections
    in bf16 1.25x faster than TensorFlow's oneDNN MatMul (docs/design.md, "Measured
    choices").  The same products and the same bf16 rounding of the sums; the plan's
    ``dense`` choice says when to call this.
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
    """``layer(x)``, or `dense_rows` with its weights where ``onednn`` (the plan's
    ``dense`` choice) and the layer is `plain_dense`."""
    if onednn and plain_dense(layer):
        return dense_rows(x, layer.kernel.value, layer.bias.value)
    return layer(x)


def tied_logits_float32(rows, table):
    """rows [N, H] (16-bit) times the float32 table [V, H] transposed: float32 logits [N, V].

    The tied MLM projection for CPUs whose bf16 matmuls do not run in oneDNN (no AVX-512,
    see `plan.Hardware.onednn_bf16`): TensorFlow's emulated bf16 matmul then reaches a third of the float32 rate
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
