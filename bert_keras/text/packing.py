"""Packing WordPiece ids into BERT's fixed-length inputs, as TensorFlow ops.

    [CLS] A [SEP]            segment ids 0 ... 0
    [CLS] A [SEP] B [SEP]    segment ids 0 ... 0 1 ... 1

then padded with the `[PAD]` id to `seq_len`.  Pairs too long for `seq_len`
are cut with Google's `_truncate_seq_pair` rule (google-research/bert
`run_classifier.py`): repeatedly drop the last token of the longer segment,
of segment B when both are equally long.  Only core TensorFlow ops are used
(no tensorflow-text), so the packer also runs where tensorflow-text does not.
"""

from __future__ import annotations

import tensorflow as tf


def truncated_lengths(len_a, len_b, budget):
    """Lengths Google's `_truncate_seq_pair` leaves, in closed form.

    The loop pops from the longer segment (B on ties) until
    `len_a + len_b <= budget`.  Once both have been cut they stay within one
    token of each other with A never shorter, so A keeps `ceil(budget / 2)`
    and B `floor(budget / 2)`; a segment shorter than its half keeps all its
    tokens and the other one gets the rest.

    Args:
      len_a, len_b: int tensors (any matching shape) of segment lengths.
      budget: tokens available to A and B together (`seq_len - 3`).

    Returns:
      (kept_a, kept_b) with the dtype of `len_a`.
    """
    len_a = tf.convert_to_tensor(len_a)
    len_b = tf.cast(len_b, len_a.dtype)
    budget = tf.cast(budget, len_a.dtype)
    kept_b = tf.minimum(len_b, tf.maximum(budget // 2, budget - len_a))
    kept_a = tf.minimum(len_a, budget - kept_b)
    return kept_a, kept_b


def _prefix(ids: tf.RaggedTensor, keep) -> tf.RaggedTensor:
    """The first `keep[i]` items of every row of a ragged [B, (n)] tensor."""
    positions = tf.ragged.range(ids.row_lengths())
    return tf.ragged.boolean_mask(ids, positions < tf.expand_dims(keep, 1))


def _as_ragged(ids) -> tf.RaggedTensor:
    if isinstance(ids, tf.RaggedTensor):
        return ids
    return tf.ragged.constant(ids, dtype=tf.int32) if isinstance(ids, (list, tuple)) else tf.RaggedTensor.from_tensor(ids)


def pack(ids_a, ids_b=None, *, seq_len: int, cls_id: int, sep_id: int, pad_id: int) -> dict:
    """Packs one or two segments of WordPiece ids into BERT inputs.

    Args:
      ids_a: tf.RaggedTensor int [B, (n)] (a dense [B, n] tensor counts as
        rows of length n): segment A, without special tokens.
      ids_b: optional, the same for segment B.
      seq_len: output length (python int; >= 2 for single segments, >= 3 for
        pairs).
      cls_id, sep_id, pad_id: ids of `[CLS]`, `[SEP]` and `[PAD]`.

    Returns:
      dict of dense int32 [B, seq_len] tensors:
        "token_ids": `[CLS] A [SEP] (B [SEP])` then `pad_id`;
        "segment_ids": 0 on `[CLS] A [SEP]`, 1 on `B [SEP]`, 0 on padding;
        "padding_mask": 1 on real tokens, 0 on padding.
    """
    seq_len = int(seq_len)
    specials = 2 if ids_b is None else 3
    if seq_len < specials:
        raise ValueError(f"seq_len={seq_len} leaves no room for {specials} special tokens")
    ids_a = tf.cast(_as_ragged(ids_a), tf.int32)
    batch = ids_a.nrows()
    len_a = ids_a.row_lengths()
    if ids_b is None:
        keep_a = tf.minimum(len_a, seq_len - 2)
    else:
        ids_b = tf.cast(_as_ragged(ids_b), tf.int32)
        keep_a, keep_b = truncated_lengths(len_a, ids_b.row_lengths(), seq_len - 3)
    cls = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(cls_id, tf.int32)))
    sep = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(sep_id, tf.int32)))
    first = tf.concat([cls, _prefix(ids_a, keep_a), sep], axis=1)
    parts, segments = [first], [tf.zeros_like(first)]
    if ids_b is not None:
        second = tf.concat([_prefix(ids_b, keep_b), sep], axis=1)
        parts.append(second)
        segments.append(tf.ones_like(second))
    tokens = tf.concat(parts, axis=1) if len(parts) > 1 else first
    segment = tf.concat(segments, axis=1) if len(segments) > 1 else segments[0]
    shape = tf.stack([batch, tf.constant(seq_len, tf.int64)])
    return {
        "token_ids": tokens.to_tensor(default_value=pad_id, shape=shape),
        "segment_ids": segment.to_tensor(default_value=0, shape=shape),
        "padding_mask": tf.ones_like(tokens).to_tensor(default_value=0, shape=shape),
    }
