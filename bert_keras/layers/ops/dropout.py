"""Dropout: Keras' layer is the plain one; here the 16-bit random masks of TensorFlow training.

The masks come from 16 random bits per element, one stateless Philox uint32 draw per two
elements (`random_bits_tf`), drawn outside the XLA kernels and applied inside them
(`apply_mask`); `dropout_tf` is the `bert_keras.layers.Dropout` training path.
"""

from bert_keras.layers.ops.xla import compiled

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


def apply_mask(x, bits, threshold, scale):
    """x where bits >= threshold, times scale; 0 elsewhere; x itself where bits is None (rate 0)."""
    import tensorflow as tf

    if bits is None:
        return x
    return tf.where(bits >= threshold, x * tf.cast(scale, x.dtype), tf.zeros_like(x))


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
    return compiled("dropout_apply", apply_mask)(x, bits, tf.constant(keep_threshold(rate), tf.uint16),
                                                 tf.constant(1.0 / (1.0 - rate), tf.float32))


def mask_args(dropout_layer, shape):
    """(bits, threshold, scale) for applying `dropout_layer` inside a fused function; bits None at rate 0."""
    import tensorflow as tf

    rate = dropout_layer.rate
    if rate <= 0.0:
        return None, tf.constant(0, tf.uint16), tf.constant(1.0, tf.float32)
    bits = random_bits_tf(shape, dropout_layer.seed_generator.next())
    return bits, tf.constant(keep_threshold(rate), tf.uint16), tf.constant(1.0 / (1.0 - rate), tf.float32)
