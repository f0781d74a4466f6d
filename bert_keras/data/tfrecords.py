"""Google-format pre-training TFRecord shards: read as written, and written from our examples.

The format is the one of `create_pretraining_data.py` (google-research/bert, and
tensorflow/models `official/nlp/data/create_pretraining_data.py`), read by Model Garden's
`BertPretrainDataLoader`: one `tf.train.Example` a record with the int64 features
`input_ids`, `input_mask`, `segment_ids` (L values each; `input_word_ids` and
`input_type_ids` in the "v2" naming), `masked_lm_positions`, `masked_lm_ids` (P values),
the float feature `masked_lm_weights` (P values) and `next_sentence_labels` (1 value).
The masks are static: they were drawn once, when the shard was written.

`records_dataset` yields these examples unchanged (no tokenizing, no masking) in the batch
structure of `pretraining_dataset`'s text pipeline:

    input_ids -> token_ids          masked_lm_positions -> masked_positions
    segment_ids -> segment_ids      masked_lm_ids -> masked_ids (a label)
    input_mask -> padding_mask      masked_lm_weights -> masked_weights (a label)
    next_sentence_labels -> next_sentence_label (a label, [B] instead of [B, 1])

Records are read by TensorFlow's record reader (every length and data CRC checked) in
chunks, a few files at a time round-robin, parsed with `tf.io.parse_example`, and a damaged
record or a record of another length is a `DataError` naming the file.  The first record of
every shard is checked when the dataset is built, so a shard of 128-token examples given to
a 512-token phase fails at once, in one line.

`shard_lengths` and `phase_shards` pick, among a run's shards, those of a phase's length
(a folder may hold 128- and 512-token shards side by side); `tfrecord_writer.write_shards`
writes our examples in the same format.
"""

from __future__ import annotations

import collections
import logging
import os
import re

import numpy as np
import tensorflow as tf

from bert_keras.errors import DataError

logger = logging.getLogger("bert_keras.data")

# "x.tfrecord", "x.tfrecord-00003-of-00100", "x.tfrecords.gz" are named as shards.
_NAMED = re.compile(r"\.(?:tfrecords?|tfrec)(?:-\d+-of-\d+)?(?:\.gz)?$", re.IGNORECASE)
_HEADER_BYTES = 12  # uint64 length + masked CRC32C of it
CHUNK = 1024  # records read and parsed per TensorFlow call
CYCLE = 4  # files read at a time, round-robin, when shuffling
SHUFFLE_BUFFER = 10_000

# Google's feature -> (our key, whether it is a label, length: "L", "P" or 1)
FEATURES = {
    "input_ids": ("token_ids", False, "L"),
    "segment_ids": ("segment_ids", False, "L"),
    "input_mask": ("padding_mask", False, "L"),
    "masked_lm_positions": ("masked_positions", False, "P"),
    "masked_lm_ids": ("masked_ids", True, "P"),
    "masked_lm_weights": ("masked_weights", True, "P"),
    "next_sentence_labels": ("next_sentence_label", True, 1),
}
_V2_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}


def _compression(path):  # Google's --gzip_compress shards are named .gz here
    return "GZIP" if path.lower().endswith(".gz") else ""


def _size(path):
    try:
        return tf.io.gfile.stat(path).length
    except tf.errors.OpError:
        return 0


def _reads_a_record(path):
    """Whether TensorFlow's record reader accepts the first record (header and data CRCs)."""
    try:
        return len(list(tf.data.TFRecordDataset(path).take(1))) == 1
    except tf.errors.OpError:
        return False


def is_tfrecord_file(path) -> bool:
    """Whether ``path`` is a TFRecord file: named like one (``.tfrecord``, ``.tfrecords``,
    ``.tfrec``, optionally ``-00000-of-00010`` or ``.gz`` after it), or starting with a record
    whose header length fits the file and whose CRCs TensorFlow's record reader accepts."""
    path = os.fspath(path)
    if _NAMED.search(path):
        return True
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            head = f.read(_HEADER_BYTES)
    except (tf.errors.OpError, OSError):
        return False
    # a text file's first 8 bytes read as a length far beyond its size: no reader needed
    length = int.from_bytes(head[:8], "little")
    return len(head) == _HEADER_BYTES and length + _HEADER_BYTES + 4 <= _size(path) and _reads_a_record(path)


def split_kinds(files):
    """True when every file is a TFRecord shard, False when none is; a mix is a `DataError`."""
    kinds = [is_tfrecord_file(p) for p in files]
    if any(kinds) and not all(kinds):
        shard, text = files[kinds.index(True)], files[kinds.index(False)]
        raise DataError(f"pre-training files mix TFRecord shards ({shard}) and text ({text}); "
                        f"give one kind per phase")
    return bool(kinds) and all(kinds)


def _names(example_keys):
    """Google's feature name -> the name this shard uses (v1 or v2 naming)."""
    v2 = "input_word_ids" in example_keys
    return {g: (_V2_NAMES.get(g, g) if v2 else g) for g in FEATURES}


def _spec(names, seq_len, max_predictions, fixed=True):
    spec = {}
    for google, (_, _, size) in FEATURES.items():
        dtype = tf.float32 if google == "masked_lm_weights" else tf.int64
        n = seq_len if size == "L" else max_predictions if size == "P" else 1
        spec[names[google]] = tf.io.FixedLenFeature([n], dtype) if fixed else tf.io.VarLenFeature(dtype)
    return spec


def _lengths_message(path, record, seq_len, max_predictions, names):
    """The one-line message for a record whose lengths differ from the phase's."""
    try:
        parsed = tf.io.parse_single_example(record, _spec(names, 0, 0, fixed=False))
    except tf.errors.OpError as e:  # a feature of another type (floats for ids)
        return f"{path}: examples do not parse as Google's pre-training features ({_first_line(e)})"
    got = {g: int(tf.size(parsed[names[g]].values)) for g in FEATURES}
    if got["input_ids"] != seq_len:
        return f"{path}: examples are {got['input_ids']} tokens long, this phase needs {seq_len}"
    if got["masked_lm_positions"] != max_predictions:
        return (f"{path}: examples have {got['masked_lm_positions']} masked-LM slots (max_predictions), "
                f"this phase needs {max_predictions}")
    want = {g: seq_len if size == "L" else max_predictions if size == "P" else 1
            for g, (_, _, size) in FEATURES.items()}
    bad = [f"{names[g]} has {got[g]} values, not {want[g]}" for g in FEATURES if got[g] != want[g]]
    return f"{path}: examples do not have Google's pre-training feature lengths ({'; '.join(bad)})"


def check_shard(path, seq_len, max_predictions, vocab_size):
    """Reads the first record of a shard and refuses, in one line, one this phase cannot use.

    Returns:
      Google's feature name -> the name the shard uses (v1 or v2 naming).

    Raises:
      DataError: not a readable TFRecord file, a truncated one, features missing, examples of
        another length or number of masked-LM slots, or ids beyond the vocabulary.
    """
    compression = _compression(path)
    size = _size(path)
    try:
        records = list(tf.data.TFRecordDataset(path, compression_type=compression).take(1))
    except tf.errors.OpError as e:
        raise DataError(f"{path}: not a readable TFRecord file ({_first_line(e)})") from None
    if not records and size and not compression:
        raise DataError(f"{path}: truncated TFRecord file ({size} bytes, not one whole record)")
    if not records:
        return _names(())
    record = records[0]
    try:
        example = tf.train.Example.FromString(record.numpy())
    except Exception:  # noqa: BLE001 - protobuf's DecodeError
        raise DataError(f"{path}: its records are not tf.train.Example protos") from None
    keys = set(example.features.feature)
    names = _names(keys)
    missing = [n for n in names.values() if n not in keys]
    if missing:
        raise DataError(f"{path}: examples have no {', '.join(missing)} feature(s); expected Google's "
                        f"pre-training features ({', '.join(names.values())})")
    try:
        parsed = tf.io.parse_single_example(record, _spec(names, seq_len, max_predictions))
    except tf.errors.OpError:
        raise DataError(_lengths_message(path, record, seq_len, max_predictions, names)) from None
    top = int(tf.reduce_max(parsed[names["input_ids"]]))
    if top >= vocab_size:
        raise DataError(f"{path}: examples hold token id {top}, beyond the vocabulary's {vocab_size} "
                        f"tokens (written with another vocabulary?)")
    return names


def _first_line(error):
    """TensorFlow's message, without its op and function names: "corrupted record at 12"."""
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", getattr(error, "message", None) or str(error)).strip()
    return re.sub(r"\s*\[Op:.*$", "", text.splitlines()[0]) if text else type(error).__name__


class _RecordStream:
    """The Python stage: parsed chunks of records, file after file, pass after pass.

    Each call is one iteration over the dataset.  File order is shuffled per pass from
    (seed, iteration, pass) when shuffling; a few files are read at a time, round-robin.
    """

    def __init__(self, *, files, names, seq_len, max_predictions, passes, shuffle, entropy, shard,
                 num_shards, shard_examples, stats):
        self.files, self.names = files, names
        self.seq_len, self.max_predictions = seq_len, max_predictions
        self.passes, self.shuffle, self.entropy = passes, shuffle, entropy
        self.shard, self.num_shards, self.shard_examples = shard, num_shards, shard_examples
        self.stats = stats
        self.iterations = 0

    def _chunks(self, path):
        names = self.names[path]
        spec = _spec(names, self.seq_len, self.max_predictions)
        dataset = tf.data.TFRecordDataset(path, compression_type=_compression(path)).batch(CHUNK)
        read = 0
        iterator = iter(dataset)
        while True:
            try:
                records = next(iterator)
            except StopIteration:
                return
            except tf.errors.OpError as e:
                raise DataError(f"{path}: damaged TFRecord file after {read} records "
                                f"({_first_line(e)})") from None
            try:
                parsed = tf.io.parse_example(records, spec)
            except tf.errors.OpError:
                for i, record in enumerate(records):
                    try:
                        tf.io.parse_single_example(record, spec)
                    except tf.errors.OpError:
                        message = _lengths_message(path, record, self.seq_len, self.max_predictions, names)
                        raise DataError(f"{message} (record {read + i})") from None
                raise
            read += len(records)
            yield tuple(parsed[names[g]].numpy().astype(np.float32 if g == "masked_lm_weights" else np.int32)
                        for g in FEATURES)

    def _interleaved(self, files, cycle):
        open_ = [self._chunks(p) for p in files[:cycle]]
        rest = list(files[cycle:])
        while open_:
            for source in list(open_):
                chunk = next(source, None)
                if chunk is None:
                    open_.remove(source)
                    if rest:
                        open_.append(self._chunks(rest.pop(0)))
                    continue
                yield chunk

    def __call__(self):
        iteration = self.iterations
        self.iterations += 1
        pass_ = 0
        while self.passes is None or pass_ < self.passes:
            files = list(self.files)
            if self.shuffle:
                key = np.random.SeedSequence(self.entropy, spawn_key=(iteration, pass_))
                np.random.default_rng(key).shuffle(files)
            produced, position = 0, 0
            for chunk in self._interleaved(files, CYCLE if self.shuffle else 1):
                n = len(chunk[0])
                if self.shard_examples:  # every pipeline reads the same stream and keeps its own rows
                    keep = np.arange(n)[(np.arange(n) + position) % self.num_shards == self.shard]
                    position += n
                    chunk = tuple(c[keep] for c in chunk)
                    n = len(keep)
                if n:
                    produced += n
                    self.stats.examples += n
                    self.stats.not_next_examples += int(chunk[-1].sum())
                    yield chunk
            if not produced:
                raise DataError(f"no examples in TFRecord pre-training files (empty shards, or fewer "
                                f"examples than input pipelines): {', '.join(self.files[:3])}")
            pass_ += 1
            self.stats.epochs += 1


def records_dataset(files, vocab_path, seq_len, max_predictions, batch_size, seed, *, passes, shuffle,
                    drop_remainder, shard, num_shards, shard_examples, stats, all_files=None):
    """Batches of Google-format TFRecord examples, as written, in `pretraining_dataset`'s structure.

    Args:
      files: this input pipeline's shards (already resolved and sharded).
      vocab_path: the vocabulary (ids of the shards must lie in it).
      seq_len, max_predictions: L and P; every shard's examples must have them.
      batch_size: examples a batch.
      seed: int or None (a fresh random one).
      passes: passes over the shards (None: endless).
      shuffle: file order every pass and a `SHUFFLE_BUFFER`-example shuffle buffer.
      drop_remainder: drop a last partial batch (finite passes only).
      shard, num_shards, shard_examples: this pipeline's share (see `pretraining._shard`).
      stats: a `PretrainingStats`; `files`, `examples`, `not_next_examples` and `epochs` grow.
      all_files: every pipeline's shards, all checked up front (default: ``files``).

    Returns:
      A `tf.data.Dataset` of `(features, labels)` dicts (see `pretraining_dataset`).
    """
    from bert_keras.data.corpus import read_vocab

    vocab, _ = read_vocab(vocab_path)
    names = {p: check_shard(p, seq_len, max_predictions, len(vocab)) for p in (all_files or files)}
    stats.files += len(files)
    logger.info("pre-training TFRecords: %d shard(s) of %d-token examples with %d masked-LM slots",
                len(files), seq_len, max_predictions)
    entropy = int(seed) if seed is not None else np.random.SeedSequence().entropy
    stream = _RecordStream(files=files, names=names, seq_len=seq_len, max_predictions=max_predictions,
                           passes=passes, shuffle=shuffle, entropy=entropy, shard=shard,
                           num_shards=num_shards, shard_examples=shard_examples, stats=stats)
    signature = tuple(tf.TensorSpec([None, seq_len if size == "L" else max_predictions if size == "P" else 1],
                                    tf.float32 if g == "masked_lm_weights" else tf.int32)
                      for g, (_, _, size) in FEATURES.items())
    dataset = tf.data.Dataset.from_generator(stream, output_signature=signature).unbatch()
    if shuffle:
        shuffle_seed = int(np.random.SeedSequence(entropy, spawn_key=(shard, 1)).generate_state(1)[0])
        dataset = dataset.shuffle(SHUFFLE_BUFFER, seed=shuffle_seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder or passes is None)

    def to_dicts(*values):
        features, labels = {}, {}
        for value, (ours, is_label, _) in zip(values, FEATURES.values()):
            (labels if is_label else features)[ours] = value
        labels["next_sentence_label"] = labels["next_sentence_label"][:, 0]
        return features, labels

    dataset = dataset.map(to_dicts, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return dataset.prefetch(tf.data.AUTOTUNE)


def shard_lengths(path):
    """``(seq_len, max_predictions)`` of a shard's examples, from its first record; None when it has none."""
    try:
        records = list(tf.data.TFRecordDataset(path, compression_type=_compression(path)).take(1))
    except tf.errors.OpError as e:
        raise DataError(f"{path}: not a readable TFRecord file ({_first_line(e)})") from None
    if not records:
        return None
    try:
        feature = tf.train.Example.FromString(records[0].numpy()).features.feature
    except Exception:  # noqa: BLE001 - protobuf's DecodeError
        raise DataError(f"{path}: its records are not tf.train.Example protos") from None
    names = _names(set(feature))
    ids, positions = feature.get(names["input_ids"]), feature.get(names["masked_lm_positions"])
    if ids is None or positions is None:
        raise DataError(f"{path}: examples have no {names['input_ids']} or {names['masked_lm_positions']} feature; "
                        "expected Google's pre-training features")
    return len(ids.int64_list.value), len(positions.int64_list.value)


def phase_shards(files, seq_len, max_predictions, what="pre-training files"):
    """The shards among ``files`` whose examples are ``seq_len`` tokens with ``max_predictions``
    masked-LM slots, in order; none is a one-line `DataError` saying what the shards hold."""
    lengths = {path: shard_lengths(path) for path in files}
    chosen = [path for path in files if lengths[path] == (seq_len, max_predictions)]
    if not chosen:
        held = collections.Counter(v for v in lengths.values() if v)
        found = ", ".join(f"{n} of {length} tokens with {slots}" for (length, slots), n in sorted(held.items()))
        raise DataError(f"{what}: no shard holds examples of {seq_len} tokens with {max_predictions} masked-LM "
                        f"slots; the {len(files)} shard(s) hold {found or 'no examples'}")
    return chosen
