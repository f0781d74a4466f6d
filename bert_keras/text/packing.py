"""Packing WordPiece ids into BERT's fixed-length inputs: the one definition of the layout.

    [CLS] A [SEP]            segment ids 0 ... 0
    [CLS] A [SEP] B [SEP]    segment ids 0 ... 0 1 ... 1

then padded with the `[PAD]` id to `seq_len`.  Pairs too long for `seq_len`
are cut with Google's `_truncate_seq_pair` rule (google-research/bert
`run_classifier.py`): repeatedly drop the last token of the longer segment,
of segment B when both are equally long (`kept_lengths`).

- `pack` / `pack_ragged`: ragged TensorFlow ids (the tokenizer layer, the TF Hub
  preprocessor); core ops only, so it also runs where tensorflow-text does not;
- `pack_dense`: the same with dense ops, in TensorFlow (the TFLite text
  front-ends) or numpy;
- `pack_flat` / `pack_lists`: numpy, for segments in one flat id array (the
  pre-training pairs) or Python lists (the fine-tuning featurizers).
"""

from __future__ import annotations

import numpy as np
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
    return pack_ragged(segments, seq_len, cls_id=cls_id, sep_id=sep_id, pad_id=pad_id)


def pack_ragged(segments, seq_len, *, cls_id, sep_id, pad_id) -> dict:
    """`pack_dense` over 1 or 2 ragged int [B, (n)] segments, `seq_len` an int or an int scalar
    tensor (a length too short for the special tokens keeps what fits of them).

    Returns:
      dict of dense int32 [B, seq_len] tensors, as `pack`.
    """
    takes = [_ragged_take(s) for s in segments]
    take_b, len_b = takes[1] if len(takes) > 1 else (None, None)
    return pack_dense(*takes[0], take_b, len_b, seq_len=seq_len, cls_id=cls_id, sep_id=sep_id, pad_id=pad_id)


def _ragged_take(ids: tf.RaggedTensor):
    """(take, lengths) of a ragged [B, (n)] segment for `pack_dense`: a gather from its flat values."""
    values = tf.concat([tf.cast(ids.flat_values, tf.int32), tf.zeros([1], tf.int32)], 0)
    starts = tf.cast(ids.row_starts(), tf.int32)[:, None]

    def take(offsets, valid):
        return tf.gather(values, tf.clip_by_value(starts + offsets, 0, tf.size(values) - 1))

    return take, tf.cast(ids.row_lengths(), tf.int32)


def pack_dense(take_a, len_a, take_b=None, len_b=None, *, seq_len: int, cls_id: int, sep_id: int,
               pad_id: int, numpy: bool = False) -> dict:
    """`pack` with dense ops only: TensorFlow ops TFLite lowers (no ragged tensors), or numpy.

    The one layout of `[CLS] A [SEP] (B [SEP])` on fixed-length rows: the
    exported text front-ends use it in TensorFlow, the fine-tuning featurizers
    and the pre-training pairs in numpy (`pack_flat`).

    Args:
      take_a: `take_a(offsets, valid)` -> int32 [B, seq_len], the id at
        offsets[b, j] of segment A of row b where valid (anything elsewhere);
        offsets int32 [B, seq_len].
      len_a: int32 [B], the lengths of segment A.
      take_b, len_b: the same for the optional segment B.
      seq_len, cls_id, sep_id, pad_id: as in `pack`.
      numpy: numpy arrays in and out instead of tensors.

    Returns:
      dict of int32 [B, seq_len] tensors (arrays), as `pack`.
    """
    ops = _NUMPY_OPS if numpy else _TF_OPS
    L = int(seq_len) if numpy or isinstance(seq_len, int) else tf.cast(seq_len, tf.int32)
    j = ops["range"](L)[None, :]
    if take_b is None:
        keep_a = ops["minimum"](len_a, ops["maximum"](L - 2, 0))[:, None]
        keep_b = ops["zeros_like"](keep_a)
    else:
        budget = ops["maximum"](L - 3, 0)
        if numpy:
            keep_a, keep_b = kept_lengths(len_a, len_b, budget, np.minimum, np.maximum)
        else:
            keep_a, keep_b = truncated_lengths(len_a, len_b, budget)
        keep_a, keep_b = keep_a[:, None], keep_b[:, None]
    where, equal, clip = ops["where"], ops["equal"], ops["clip"]
    in_a = (j >= 1) & (j <= keep_a)
    tokens = where(in_a, take_a(j - 1 + ops["zeros_like"](keep_a), in_a), 0)
    tokens = where(equal(j, 0), cls_id, tokens)
    tokens = where(equal(j, keep_a + 1), sep_id, tokens)
    end = keep_a + 2  # length of [CLS] A [SEP]
    segment = ops["zeros_like"](tokens)
    if take_b is not None:
        in_b = (j >= end) & (j < end + keep_b)
        tokens = where(in_b, take_b(j - end, in_b), tokens)
        tokens = where(equal(j, end + keep_b), sep_id, tokens)
        # 0/1 by integer clipping, not a cast of a boolean: the converter
        # folds `cast(bool) < 0` (the embedding lookup's index check) into
        # a boolean zeros_like that TFLite has no kernel for.
        segment = clip(j - end + 1, 0, 1) * clip(end + keep_b - j + 1, 0, 1)
        end = end + keep_b + 1
    mask = clip(end - j, 0, 1)
    tokens = where(mask > 0, tokens, pad_id)
    out = {"token_ids": tokens, "segment_ids": segment, "padding_mask": mask}
    return {k: v.astype(np.int32) for k, v in out.items()} if numpy else out


_TF_OPS = {"range": lambda n: tf.range(n, dtype=tf.int32), "minimum": tf.minimum, "maximum": tf.maximum,
           "where": tf.where,
           "equal": tf.equal, "clip": tf.clip_by_value, "zeros_like": tf.zeros_like}
_NUMPY_OPS = {"range": lambda n: np.arange(n, dtype=np.int32), "minimum": np.minimum, "maximum": np.maximum,
              "where": np.where,
              "equal": np.equal, "clip": np.clip, "zeros_like": np.zeros_like}


def pack_flat(ids, start_a, len_a, start_b=None, len_b=None, *, seq_len: int, cls_id: int, sep_id: int,
              pad_id: int) -> dict:
    """`pack_dense` in numpy for segments stored as runs of one flat id array.

    Args:
      ids: int [T], every segment's ids one after the other.
      start_a, len_a: int [B], segment A of row b is ids[start_a[b] : start_a[b] + len_a[b]].
      start_b, len_b: the same for the optional segment B.

    Returns:
      dict of int32 numpy arrays [B, seq_len].
    """
    flat = np.concatenate([np.asarray(ids, np.int32).reshape(-1), np.zeros([1], np.int32)])

    def take(starts):
        starts = np.asarray(starts, np.int64)[:, None]
        return lambda offsets, valid: flat[np.clip(starts + offsets, 0, len(flat) - 1)]

    len_a = np.asarray(len_a, np.int32)
    if start_b is None:
        return pack_dense(take(start_a), len_a, seq_len=seq_len, cls_id=cls_id, sep_id=sep_id, pad_id=pad_id,
                          numpy=True)
    return pack_dense(take(start_a), len_a, take(start_b), np.asarray(len_b, np.int32), seq_len=seq_len,
                      cls_id=cls_id, sep_id=sep_id, pad_id=pad_id, numpy=True)


def pack_lists(rows_a, rows_b=None, *, seq_len: int, cls_id: int, sep_id: int, pad_id: int) -> dict:
    """`pack_flat` for Python lists of id lists (rows_b: one list per row of rows_a, or None)."""
    rows_a = list(rows_a)
    rows = rows_a + (list(rows_b) if rows_b is not None else [])
    lengths = np.array([len(r) for r in rows], np.int64)
    starts = np.cumsum(lengths) - lengths
    ids = np.fromiter((i for r in rows for i in r), np.int32, count=int(lengths.sum()))
    n = len(rows_a)
    if rows_b is None:
        return pack_flat(ids, starts, lengths, seq_len=seq_len, cls_id=cls_id, sep_id=sep_id, pad_id=pad_id)
    if len(rows) != 2 * n:
        raise ValueError(f"{n} first segments but {len(rows) - n} second segments")
    return pack_flat(ids, starts[:n], lengths[:n], starts[n:], lengths[n:], seq_len=seq_len,
                     cls_id=cls_id, sep_id=sep_id, pad_id=pad_id)
