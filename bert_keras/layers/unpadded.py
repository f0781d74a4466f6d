"""Inference on the real tokens only: the encoder's position-wise layers skip the padding.

A batch of real sentences padded to its longest member is mostly padding (the Rotten
Tomatoes dev snippets in batches of 32: 52% of the positions are real; padded to a fixed
128, as the text signatures do, 21%).  Every layer of a BERT block except the attention
scores works position by position: the Q/K/V, output and feed-forward matmuls, the
residual adds, LayerNorm and GELU give a real token the same numbers whatever the padding
around it.  So at inference the encoder packs the real tokens into one [T + 1, H] matrix
(T = number of real tokens, plus a spare row for the padding to read), runs those layers
on it, and scatters into [B, length, *] (length = the batch's longest sentence) only for
the attention scores and context, gathering the real rows back right after.  Real
positions get the same numbers as the padded path (up to matmul summation order: 1e-6 on
MiniLM); padding positions of ``sequence_output`` are 0 instead of the values the padded
path computes for them (which nothing should read).

Chosen by the encoder's ``real_tokens_only`` option (`BertEncoder`; the per-sequence task
models, `BertClassifier` and `BertMultipleChoice`, ask for it in every inference call,
`models.tasks`), and only where `use_unpadded` agrees: the kernel plan allows it
(`bert_keras.layers.plan.KernelPlan.packing`: inference, the TensorFlow backend, not traced
into an XLA compile, whose data-dependent shapes the packing cannot have) and every block
masks additively (the full-integer TFLite export traces "select" masking).
"""

from bert_keras.layers import plan

# The name scope of the packing ops: a traced graph took this path if a node name holds it.
SCOPE = "real_tokens_only"


def use_unpadded(encoder, training, real_tokens_only):
    """True where ``encoder`` (a `BertEncoder`) should run this call on the real tokens only."""
    if not real_tokens_only or not plan.current_plan(training=training).packing:
        return False
    return all(block.attention.masking == "additive" for block in encoder.transformer_layers)


class Packing:
    """Where the real tokens of a [B, L] padding mask are, and the moves between the layouts.

    The packed layout is [T + 1, C]: the T real tokens in row-major order, then one spare row
    (computed from the batch's position (0, 0)) that every padding position of a scatter
    reads.  The attention never uses what the padding holds (its keys get a -10000 bias, so
    their probabilities are exactly 0, and its queries' rows are dropped by the next gather),
    only that it is finite; so the per-layer scatters need no zero row appended, and T = 0
    still has a row to read.

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
        self._count = tf.shape(self.indices)[0]
        # The packed rows to gather: the real tokens and the spare row.
        self._packed = tf.concat([self.indices, tf.zeros([1, 2], tf.int32)], 0)
        self._positions = tf.gather(self._packed, 1, axis=1)
        # The spare row's position 0 keeps an all-padding batch (T = 0) well defined.
        self.length = tf.reduce_max(self._positions) + 1
        # [B, L]: each real token's row in the packed layout, and T (the spare row) at the
        # padding: scattering is a row gather (MiniLM, the first 20 batches of 32: 3.2 ms of
        # gathers a call, 5.8 ms when every scatter gathered from a copy with a zero row
        # appended, 9.7 ms as scatter_nd).
        rank = tf.reshape(tf.cumsum(tf.reshape(tf.cast(real, tf.int32), [-1])), self.shape) - 1
        self._rows = tf.where(real, rank, self._count)
        # The rows of the attention's [B, length] layout, sliced once for every layer.
        self._attention_rows = tf.slice(self._rows, tf.zeros([2], tf.int32), tf.stack([-1, self.length]))

    def attention_bias(self, bias):
        """[B, 1, 1, L] additive bias -> [B, 1, 1, length]: the keys the attention sees."""
        import tensorflow as tf

        # tf.slice, not [..., :length]: LiteRT has no strided slice with a computed end.  The
        # sizes of the two unit axes are spelled out so that the result's shape is known to be
        # [B, 1, 1, length]: TensorFlow's remapper then fuses the bias add (and the query scale)
        # into the oneDNN scores matmul, which it declines for a bias of unknown shape.
        return tf.slice(bias, tf.zeros([4], tf.int32), tf.stack([-1, 1, 1, self.length]))

    @property
    def positions(self):
        """int32 [T + 1]: each packed row's position in its sentence (the spare row's is 0)."""
        return self._positions

    def gather(self, x):
        """[B, length or L, ...] -> [T + 1, ...]: the real rows and the spare row."""
        import tensorflow as tf

        return tf.gather_nd(x, self._packed)

    def scatter(self, x, full=False):
        """[T + 1, C] -> [B, length, C]: the padding holds the spare row, which only the
        attention reads.  ``full``: [B, L, C] with zeros at the padding (the encoder's output)."""
        import tensorflow as tf

        if not full:
            return tf.gather(x, self._attention_rows)
        real = tf.slice(x, tf.zeros([2], tf.int32), tf.stack([self._count, -1]))
        return tf.gather(tf.pad(real, [[0, 1], [0, 0]]), self._rows)
