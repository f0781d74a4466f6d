"""Pieces shared by the task readers and featurizers.

The featurizers take any tokenizer object with

    tokenize(list_of_str) -> tf.RaggedTensor int32 [batch, (pieces)]

(`bert_keras.BertTokenizer`, or any adapter with the same method; a nested
Python list is accepted too) and find the special ids through its `cls_id`,
`sep_id`, `pad_id`, `unk_id` attributes, or else through its `vocab`
(a list of tokens in id order, a {token: id} dict, or a vocab.txt path).
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import os
import pathlib

import numpy as np

from bert_keras.errors import DataError
from bert_keras.text import vocab as vocab_file
from bert_keras.text.packing import kept_lengths, pack_lists

# Label id of positions that do not count in the loss or the metrics
# (sub-tokens after a word's first, special tokens, padding); the value
# Hugging Face uses, accepted by keras' `ignore_class`.
IGNORE_LABEL = -100


class ExampleList(list):
    """A list of examples that also says how many input records were skipped.

    Attributes:
      skipped: number of records dropped where the official scripts drop them
        (e.g. a SQuAD answer not found in its context, a QQP row with missing
        columns).
      skip_reasons: the first few skips as "file:line: reason" strings.
    """

    def __init__(self, items=(), skipped=0, skip_reasons=()):
        super().__init__(items)
        self.skipped = skipped
        self.skip_reasons = list(skip_reasons)

    def skip(self, reason):
        self.skipped += 1
        if len(self.skip_reasons) < 20:
            self.skip_reasons.append(reason)


class LabelMap:
    """A fixed, ordered label set: label string <-> class id.

        lm = LabelMap(["negative", "positive"])
        lm.encode("positive", where="train.tsv:3")   # 1
        lm.decode(0)                                  # "negative"

    Labels are strings (JSON ints/bools become their `str`); a label outside the
    set raises `DataError` naming it and where it was found.
    """

    def __init__(self, labels):
        labels = [str(l) for l in labels]
        if not labels:
            raise DataError("label set is empty")
        if len(set(labels)) != len(labels):
            raise DataError(f"label set has duplicates: {labels}")
        self.labels = labels
        self._ids = {l: i for i, l in enumerate(labels)}

    @classmethod
    def from_examples(cls, examples, attr="label"):
        """The sorted set of labels seen in examples (None labels ignored)."""
        seen = {str(getattr(e, attr)) for e in examples if getattr(e, attr) is not None}
        if not seen:
            raise DataError("no labels in the examples")
        return cls(sorted(seen))

    def __len__(self):
        return len(self.labels)

    def __iter__(self):
        return iter(self.labels)

    def __contains__(self, label):
        return str(label) in self._ids

    def __eq__(self, other):
        return isinstance(other, LabelMap) and other.labels == self.labels

    def __repr__(self):
        return f"LabelMap({self.labels!r})"

    def encode(self, label, where=""):
        key = str(label)
        if key not in self._ids:
            prefix = f"{where}: " if where else ""
            raise DataError(f"{prefix}field 'label': {key!r} is not in the label set "
                            f"{self.labels}")
        return self._ids[key]

    def decode(self, index):
        return self.labels[int(index)]

    def to_json(self):
        return list(self.labels)


# ----------------------------------------------------------------------------
# Reading text files


def text_lines(path):
    """Yields (line_number, line) of a UTF-8 text file, line ends kept, a leading BOM dropped.

    Each line is decoded on its own so that invalid UTF-8 raises `DataError`
    naming the file, the line and the offending byte (the codec's own message
    names neither).
    """
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if n == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            try:
                yield n, raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{path}:{n}: not valid UTF-8 (byte {raw[e.start]:#04x} at column "
                                f"{e.start + 1})") from None


def csv_rows(path, delimiter=",", quoting=csv.QUOTE_MINIMAL):
    """(header, rows) of a CSV/TSV file with a header row; rows yields (line_number, fields).

    `quoting=csv.QUOTE_NONE` reads quotes as text (GLUE's TSV files, which
    Google's readers read with `quotechar=None`).

    Blank rows are skipped.  Raises `DataError` naming the file for an empty
    file, and file and line for invalid UTF-8, a quote that is never closed
    or a row with the wrong number of fields.
    """
    lines = text_lines(path)
    numbers = []  # line number of every line the csv reader has pulled

    def feed():
        for n, line in lines:
            numbers.append(n)
            yield line

    reader = csv.reader(feed(), delimiter=delimiter, quoting=quoting)
    try:
        header = next(reader, None)
    except csv.Error as e:
        raise DataError(f"{path}:1: malformed header ({e})") from None
    if header is None:
        raise DataError(f"{path}: empty file (expected a header row)")
    header = [h.strip() for h in header]

    def rows():
        consumed = len(numbers)
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise DataError(f"{path}:{numbers[-1]}: malformed row ({e})") from None
            start, consumed = numbers[consumed], len(numbers)
            if not any(x.strip() for x in fields):
                continue
            if len(fields) != len(header):
                if any("\n" in x for x in fields):
                    # a quote opened in this row swallowed the lines after it
                    raise DataError(f"{path}:{start}: unterminated quote: the quoted field opened on this "
                                    f"line runs on to line {numbers[-1]}")
                raise DataError(f"{path}:{start}: expected {len(header)} fields "
                                f"({', '.join(header)}), got {len(fields)}")
            yield start, fields

    return header, rows()


# ----------------------------------------------------------------------------
# Tokenizer access


def token_ids(tokenizer, texts):
    """Tokenizes texts -> list of lists of Python ints (no special tokens)."""
    texts = list(texts)
    if not texts:
        return []
    result = tokenizer.tokenize(texts)
    if hasattr(result, "to_list"):
        result = result.to_list()
    elif isinstance(result, np.ndarray):
        result = result.tolist()
    out = []
    for row in result:
        if hasattr(row, "tolist"):
            row = row.tolist()
        out.append([int(i) for i in row])
    if len(out) != len(texts):
        raise DataError(f"tokenizer returned {len(out)} rows for {len(texts)} texts")
    return out


def vocab_list(tokenizer=None, vocab=None):
    """The vocabulary as a list of tokens in id order.

    From `vocab` (list, {token: id} dict or vocab.txt path) or the tokenizer's
    `vocab` / `vocab_path` attribute.
    """
    source = vocab
    if source is None and tokenizer is not None:
        for attr in ("vocab", "vocabulary", "vocab_path", "vocab_file"):
            value = getattr(tokenizer, attr, None)
            if callable(value):
                value = value()
            if value is not None:
                source = value
                break
    if source is None:
        raise DataError("need the vocabulary: pass vocab= (a vocab.txt path or a token list) "
                        "or a tokenizer with a `vocab` attribute")
    if isinstance(source, (str, os.PathLike)):
        path = pathlib.Path(source)
        if not path.is_file():
            raise DataError(f"{path}: vocabulary file not found")
        return vocab_file.load_vocab(path)
    if isinstance(source, dict):
        tokens = [None] * len(source)
        for token, index in source.items():
            tokens[int(index)] = token
        return tokens
    if hasattr(source, "numpy"):  # a tf tensor of strings
        source = source.numpy().tolist()
    return [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in source]


@dataclasses.dataclass(frozen=True)
class SpecialIds:
    cls: int
    sep: int
    pad: int
    unk: int


def special_ids(tokenizer):
    """[CLS], [SEP], [PAD], [UNK] ids from the tokenizer's attributes or its vocabulary."""
    names = ("cls_id", "sep_id", "pad_id", "unk_id")
    values = [getattr(tokenizer, n, None) for n in names]
    if all(v is not None for v in values):
        return SpecialIds(*(int(v) for v in values))
    tokens = vocab_list(tokenizer)
    index = vocab_file.token_ids(tokens)
    found = []
    for attr, token in zip(values, ("[CLS]", "[SEP]", "[PAD]", "[UNK]")):
        if attr is not None:
            found.append(int(attr))
        elif token in index:
            found.append(index[token])
        elif token == "[PAD]":
            found.append(0)  # padding is masked out: any id works, Google pads with 0
        else:
            raise DataError(f"vocabulary has no {token} token")
    return SpecialIds(*found)


# ----------------------------------------------------------------------------
# Packing and padding


def truncate_pair(a, b, max_total):
    """Google's `_truncate_seq_pair`: pop from the end of the longer list (b on ties).

    The rule itself is `text.packing.kept_lengths`.
    """
    a, b = list(a), list(b)
    keep_a, keep_b = kept_lengths(len(a), len(b), max(int(max_total), 0))
    return a[:keep_a], b[:keep_b]


def pack_rows(ids_a, ids_b, special, max_seq_len):
    """[CLS] a [SEP] (b [SEP]) rows with segment ids, truncated longest-first, padded
    (`text.packing.pack_lists`).  ids_b: a list per row, or None for single segments.

    Returns:
      (inputs: {"token_ids", "segment_ids", "padding_mask"} int32 [N, max_seq_len],
       lengths: int32 [N] real lengths, truncated: int [N] 1 where the row did not fit).
    """
    inputs = pack_lists(ids_a, ids_b, seq_len=max_seq_len, cls_id=special.cls, sep_id=special.sep,
                        pad_id=special.pad)
    wanted = np.array([len(a) + (2 if ids_b is None else len(b) + 3)
                       for a, b in zip(ids_a, ids_b if ids_b is not None else [()] * len(ids_a))], np.int64)
    return inputs, inputs["padding_mask"].sum(-1).astype(np.int32), (wanted > max_seq_len).astype(np.int32)


def pad_rows(rows, length, value=0, dtype=np.int32):
    """Pads a list of lists to a [len(rows), length] array."""
    out = np.full((len(rows), length), value, dtype=dtype)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def in_memory_pipeline(ds):
    """``ds`` (batches cut from arrays in memory) prefetched two batches ahead, without tf.data's
    autotuning.  Its background optimiser has nothing to tune in slicing arrays, and destroying
    an iterator waits for a pass of it that is under way: seconds at the end of a `fit` epoch
    or a prediction loop on a busy 2-core CPU (2.8 to 4.5 s in 4 of 12 fine-tuning runs there)."""
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.prefetch(2).with_options(options)


def to_dataset(inputs, labels=None, batch_size=32, shuffle=False, seed=None,
               drop_remainder=False, trim=True, bucket=1, length_multiple=1):
    """A `tf.data.Dataset` of (inputs, labels) batches, each padded only to its longest member.

    Args:
      inputs: dict of int32 arrays [N, L] (or [N, K, L] for multiple choice)
        with a "padding_mask" entry, as the featurizers return.
      labels: array [N] / [N, L] or a dict of arrays, or None (inputs only).
      batch_size: examples per batch.
      shuffle: reshuffle every epoch (seeded by `seed`).
      drop_remainder: drop a last, smaller batch.
      trim: cut every batch to the longest sequence in it: real sentences are
        short, and padding every batch to L wastes most of the compute.
        Per-position labels ([N, L]) are cut the same way.
      length_multiple: with ``trim``, the cut length is the longest sequence rounded
        up to a multiple of this (at most L): fewer batch shapes, so fewer compilations.
      bucket: >1 groups examples of similar length: each run of
        `batch_size * bucket` (shuffled) examples is sorted by length before
        it is cut into batches, and those batches are shuffled again, so a
        batch holds sentences of similar length and trimming removes nearly
        all padding.  1 (default) keeps plain random batches.  Bucketing
        reorders examples, so use it for training, not for predictions that
        must line up with the features.

    Returns:
      tf.data.Dataset yielding `inputs` or `(inputs, labels)` batches.
    """
    import tensorflow as tf

    if "padding_mask" not in inputs:
        raise DataError("inputs need a 'padding_mask' array")
    n = len(inputs["padding_mask"])
    seq_rank = inputs["padding_mask"].ndim  # rank of one batch: [B, L] or [B, K, L]
    full_len = inputs["padding_mask"].shape[-1]
    element = (dict(inputs),) if labels is None else (dict(inputs), labels)
    ds = tf.data.Dataset.from_tensor_slices(element)
    if shuffle:
        ds = ds.shuffle(n, seed=seed, reshuffle_each_iteration=True)

    def example_lengths(mask):
        length = tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1)
        return tf.reduce_max(length, axis=-1) if mask.shape.rank == 3 else length

    if bucket and bucket > 1:
        def sort_chunk(*chunk):
            order = tf.argsort(example_lengths(chunk[0]["padding_mask"]), stable=True)
            return tf.nest.map_structure(lambda v: tf.gather(v, order), chunk)

        ds = ds.batch(batch_size * bucket).map(sort_chunk).unbatch()
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if bucket and bucket > 1 and shuffle:
        ds = ds.shuffle(bucket, seed=None if seed is None else seed + 1,
                        reshuffle_each_iteration=True)

    def cut(x, length):
        # only arrays whose last axis is the sequence axis are trimmed
        if x.shape.rank == seq_rank and x.shape[-1] == full_len:
            return x[..., :length]
        return x

    def finish(*batch):
        if trim:
            longest = tf.reduce_max(example_lengths(batch[0]["padding_mask"]))
            length = tf.minimum((longest + length_multiple - 1) // length_multiple * length_multiple, full_len)
            batch = tf.nest.map_structure(lambda v: cut(v, length), batch)
        return batch[0] if len(batch) == 1 else batch

    return in_memory_pipeline(ds.map(finish))
