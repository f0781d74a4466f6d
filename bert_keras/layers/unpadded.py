"""Inference on the real tokens only: the encoder's position-wise layers skip the padding.

A batch of real sentences padded to its longest member is mostly padding (the Rotten
Tomatoes dev snippets in batches of 32: 52% of the positions are real; padded to a fixed
128, as the text signatures do, 21%).  Every layer of a BERT block except the attention
scores works position by position: the Q/K/V, output and feed-forward matmuls, the
residual adds, LayerNorm and GELU give a real token the same numbers whatever the padding
around it.  So at inference the encoder packs the real tokens into one [T, H] matrix
(T = number of real tokens), runs those layers on it, and scatters into [B, length, *]
(length = the batch's longest sentence) only for the attention scores and context,
gathering the real rows back right after.  Real positions get the same numbers as the
padded path (up to matmul summation order: 1e-6 on MiniLM); padding positions of
``sequence_output`` are 0 instead of the values the padded path computes for them (which
nothing should read).

Opt-in: used when `use_unpadded` says so: `ENABLED` (off by default, so models and parity
checks compute the padding positions exactly as the references do; switch it on with
`enabled()` around the calls being traced, or set ``unpadded.ENABLED = True``; the SavedModel
exports of per-sequence tasks switch it on, `bert_keras.export.saved_model.REAL_TOKENS_ONLY`),
inference (``training`` false), the TensorFlow backend and additive attention masking (the
full-integer TFLite export traces "select" masking).  The packing's data-dependent shapes
cannot be XLA-compiled, so a ``jit_compile=True`` inference function must not enable it.
"""

import sys

import keras

from bert_keras.utils import temporarily

# Read when a call is traced.
ENABLED = False
# The name scope of the packing ops: a traced graph took this path if a node name holds it.
SCOPE = "real_tokens_only"
# True while a packed call is being traced or run: its shapes change with every batch, so
# the 16-bit GELU takes plain TensorFlow ops instead of an XLA kernel compiled per shape.
ACTIVE = False


def active():
    """Within this block a packed call is being traced or run (sets `ACTIVE`)."""
    return temporarily(sys.modules[__name__], "ACTIVE", True)


def enabled():
    """Within this block, inference calls being traced run on the real tokens only."""
    return temporarily(sys.modules[__name__], "ENABLED", True)


def disabled():
    """Within this block, calls being traced take the padded path."""
    return temporarily(sys.modules[__name__], "ENABLED", False)


def use_unpadded(encoder, training):
    """True where ``encoder`` (a `BertEncoder`) should run its inference on the real tokens only."""
    from bert_keras.layers.attention import BertSelfAttention

    if not ENABLED or training or keras.backend.backend() != "tensorflow":
        return False
    return all(block.attention.masking == "additive" for block in encoder.transformer_layers
               if isinstance(block.attention, BertSelfAttention))


class Packing:
    """Where the real tokens of a [B, L] padding mask are, and the moves between the layouts.

    indices: int32 [T, 2] (row, position) of every real token, in row-major order.
    length: int32 scalar, one past the last real position of the batch: the attention runs
    on [B, length] (a batch padded to a fixed length, as the text signatures and the TFLite
    files pad, pays the scores only for its longest sentence).
    """

    def __init__(self, padding_mask):
        import tensorflow as tf

        mask = tf.convert_to_tensor(padding_mask)
        # int32 throughout: LiteRT's slicing kernels take int32 (a strided slice of an int64
        # shape does not convert).  The scope names the path in a traced graph.
        with tf.name_scope(SCOPE):
            real = tf.not_equal(mask, 0)
            self.indices = tf.cast(tf.where(real), tf.int32)
        self.shape = tf.shape(mask)
        positions = tf.gather(self.indices, 1, axis=1)
        # The 0 keeps an all-padding batch (T = 0) well defined.
        self.length = tf.reduce_max(tf.concat([positions, tf.zeros([1], tf.int32)], 0)) + 1
        self._positions = positions
        # [B, L]: each real token's row in the packed [T, C] (row-major, as `indices`), and T
        # (the zero row `scatter` appends) at the padding: scattering becomes a row gather
        # (MiniLM at batch 32: 5.2 ms of gathers and pads a call where scatter_nd took 9.7).
        rank = tf.reshape(tf.cumsum(tf.reshape(tf.cast(real, tf.int32), [-1])), self.shape) - 1
        self._rows = tf.where(real, rank, tf.shape(self.indices)[0])

    def attention_bias(self, bias):
        """[B, 1, 1, L] additive bias -> [B, 1, 1, length]: the keys the attention sees."""
        import tensorflow as tf

        # tf.slice, not [..., :length]: LiteRT has no strided slice with a computed end.
        return tf.slice(bias, tf.zeros([4], tf.int32), tf.stack([-1, -1, -1, self.length]))

    @property
    def positions(self):
        """int32 [T]: each real token's position in its sentence."""
        return self._positions

    def gather(self, x):
        """[B, length or L, ...] -> [T, ...]: the real rows."""
        import tensorflow as tf

        return tf.gather_nd(x, self.indices)

    def scatter(self, x, full=False):
        """[T, C] -> [B, length, C] ([B, L, C] when ``full``), zeros at the padding."""
        import tensorflow as tf

        rows = self._rows if full else tf.slice(self._rows, tf.zeros([2], tf.int32), tf.stack([-1, self.length]))
        return tf.gather(tf.pad(x, [[0, 1], [0, 0]]), rows)
