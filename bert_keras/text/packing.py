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


def kept_lengths(len_a, len_b, budget, minimum=min, maximum=max):
    """Lengths Google's `_truncate_seq_pair` leaves, in closed form: the one
    definition of longest-first pair truncation in this project.

    The loop pops from the longer segment (B on ties) until
    `len_a + len_b <= budget`.  Once both have been cut they stay within one
    token of each other with A never shorter, so A keeps `ceil(budget / 2)`
    and B `floor(budget / 2)`; a segment shorter than its half keeps all its
    tokens and the other one gets the rest.

    Args:
      len_a, len_b: segment lengths: Python ints, or arrays / tensors of any
        matching shape together with their `minimum` and `maximum`
        (`np.minimum`, `tf.minimum`, ...).
      budget: tokens available to A and B together (`seq_len - 3`), >= 0.

    Returns:
      (kept_a, kept_b).
    """
    kept_b = minimum(len_b, maximum(budget // 2, budget - len_a))
    kept_a = minimum(len_a, budget - kept_b)
    return kept_a, kept_b


def truncated_lengths(len_a, len_b, budget):
    """`kept_lengths` on int tensors; returns (kept_a, kept_b) with the dtype of `len_a`."""
    len_a = tf.convert_to_tensor(len_a)
    len_b = tf.cast(len_b, len_a.dtype)
    budget = tf.cast(budget, len_a.dtype)
    return kept_lengths(len_a, len_b, budget, tf.minimum, tf.maximum)


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
    segments = [_as_ragged(ids_a)] + ([] if ids_b is None else [_as_ragged(ids_b)])
    tokens, segment_ids, mask = pack_ragged(segments, seq_len, cls_id=cls_id, sep_id=sep_id, pad_id=pad_id)
    return {"token_ids": tokens, "segment_ids": segment_ids, "padding_mask": mask}


def pack_ragged(segments, seq_len, *, cls_id, sep_id, pad_id):
    """`[CLS] A [SEP] (B [SEP])` from 1 or 2 ragged int [B, (n)] segments, `seq_len` an int or
    int scalar tensor (a length too short for the special tokens leaves them only).

    Returns:
      (token_ids, segment_ids, padding_mask): dense int32 [B, seq_len].
    """
    segments = [tf.cast(s, tf.int32) for s in segments]
    seq_len = tf.constant(seq_len, tf.int64) if isinstance(seq_len, int) else tf.cast(seq_len, tf.int64)
    budget = tf.maximum(seq_len - (len(segments) + 1), 0)
    lengths = [s.row_lengths() for s in segments]
    keep = [tf.minimum(lengths[0], budget)] if len(segments) == 1 else list(truncated_lengths(*lengths, budget))
    batch = segments[0].nrows()
    cls = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(cls_id, tf.int32)))
    sep = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(sep_id, tf.int32)))
    parts, types = [cls], [tf.zeros_like(cls)]
    for i, (segment, kept) in enumerate(zip(segments, keep)):
        piece = tf.concat([_prefix(segment, kept), sep], axis=1)
        parts.append(piece)
        types.append(tf.ones_like(piece) * i)
    tokens = tf.concat(parts, axis=1)
    shape = tf.stack([batch, seq_len])
    return (tokens.to_tensor(default_value=pad_id, shape=shape),
            tf.concat(types, axis=1).to_tensor(default_value=0, shape=shape),
            tf.ones_like(tokens).to_tensor(default_value=0, shape=shape))


def pack_dense(take_a, len_a, take_b=None, len_b=None, *, seq_len: int, cls_id: int, sep_id: int,
               pad_id: int) -> dict:
    """`pack` with dense ops only (no ragged tensors: they have no TFLite lowering).

    Args:
      take_a: `take_a(offsets, valid)` -> int32 [B, seq_len], the id at
        offsets[b, j] of segment A of row b where valid (anything elsewhere);
        offsets int32 [B, seq_len].
      len_a: int32 [B], the lengths of segment A.
      take_b, len_b: the same for the optional segment B.
      seq_len, cls_id, sep_id, pad_id: as in `pack`.

    Returns:
      dict of int32 [B, seq_len] tensors, as `pack`.
    """
    L = int(seq_len)
    j = tf.range(L, dtype=tf.int32)[None, :]
    if take_b is None:
        keep_a = tf.minimum(len_a, L - 2)[:, None]
        keep_b = tf.zeros_like(keep_a)
    else:
        keep_a, keep_b = truncated_lengths(len_a, len_b, L - 3)
        keep_a, keep_b = keep_a[:, None], keep_b[:, None]
    in_a = (j >= 1) & (j <= keep_a)
    tokens = tf.where(in_a, take_a(j - 1 + tf.zeros_like(keep_a), in_a), 0)
    tokens = tf.where(tf.equal(j, 0), cls_id, tokens)
    tokens = tf.where(tf.equal(j, keep_a + 1), sep_id, tokens)
    end = keep_a + 2  # length of [CLS] A [SEP]
    segment = tf.zeros_like(tokens)
    if take_b is not None:
        in_b = (j >= end) & (j < end + keep_b)
        tokens = tf.where(in_b, take_b(j - end, in_b), tokens)
        tokens = tf.where(tf.equal(j, end + keep_b), sep_id, tokens)
        # 0/1 by integer clipping, not a cast of a boolean: the converter
        # folds `cast(bool) < 0` (the embedding lookup's index check) into
        # a boolean zeros_like that TFLite has no kernel for.
        segment = tf.clip_by_value(j - end + 1, 0, 1) * tf.clip_by_value(end + keep_b - j + 1, 0, 1)
        end = end + keep_b + 1
    mask = tf.clip_by_value(end - j, 0, 1)
    tokens = tf.where(mask > 0, tokens, pad_id)
    return {"token_ids": tokens, "segment_ids": segment, "padding_mask": mask}
