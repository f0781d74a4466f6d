"""Our pre-training examples written as Google-format TFRecord shards (`bert-keras pretraining-data`).

The records are those `tfrecords.py` reads and Model Garden's `BertPretrainDataLoader` and
NVIDIA's TF2 scripts read: one `tf.train.Example` per example, the masks drawn by our
pipeline once, when the shard is written.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

SHARD_PATTERN = "pretraining-*-of-*.tfrecord"
SUMMARY_FILE = "pretraining_data.json"


def shard_name(index, count):
    """``pretraining-00003-of-00010.tfrecord``."""
    return f"pretraining-{index:05d}-of-{count:05d}.tfrecord"


def _examples(features, labels):
    """One batch of numpy (features, labels) -> serialized Google-format tf.train.Examples."""
    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values.tolist()))

    columns = {"input_ids": features["token_ids"], "input_mask": features["padding_mask"],
               "segment_ids": features["segment_ids"], "masked_lm_positions": features["masked_positions"],
               "masked_lm_ids": labels["masked_ids"]}
    weights = labels["masked_weights"]
    not_next = labels["next_sentence_label"]
    for i in range(len(not_next)):
        feature = {name: ints(column[i]) for name, column in columns.items()}
        feature["masked_lm_weights"] = tf.train.Feature(float_list=tf.train.FloatList(value=weights[i].tolist()))
        feature["next_sentence_labels"] = ints(not_next[i:i + 1])
        yield tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_shards(batches, folder, examples_per_shard, special_ids, progress=None):
    """Writes batches of the text pipeline into ``folder`` as Google-format shards.

    Args:
      batches: iterable of numpy `(features, labels)` dicts (`pretraining_dataset`'s).
      folder: an existing, empty folder (the caller makes the output whole or nothing).
      examples_per_shard: examples a shard; the last one may hold fewer.
      special_ids: ids never masked (`[CLS] [SEP] [PAD] [MASK]`), to count masked tokens.
      progress: called with the running counts after each shard, or None.

    Returns:
      Counts: shards, examples, tokens (non-padding), candidates (non-special tokens of the
      text before masking), masked (masked-LM targets), not_next; and the shard file names.
    """
    counts = dict(examples=0, tokens=0, candidates=0, masked=0, not_next=0)
    parts = []
    writer, in_shard = None, 0
    try:
        for features, labels in batches:
            original = features["token_ids"].copy()
            weights = labels["masked_weights"]
            rows, slots = np.nonzero(weights > 0)
            original[rows, features["masked_positions"][rows, slots]] = labels["masked_ids"][rows, slots]
            real = features["padding_mask"] > 0
            counts["tokens"] += int(real.sum())
            counts["candidates"] += int((real & ~np.isin(original, list(special_ids))).sum())
            counts["masked"] += int(weights.sum())
            counts["not_next"] += int(labels["next_sentence_label"].sum())
            for record in _examples(features, labels):
                if writer is None:
                    parts.append(os.path.join(folder, f".part-{len(parts):05d}"))
                    writer = tf.io.TFRecordWriter(parts[-1])
                writer.write(record)
                in_shard += 1
                counts["examples"] += 1
                if in_shard == examples_per_shard:
                    writer.close()
                    writer, in_shard = None, 0
                    if progress:
                        progress(dict(counts, shards=len(parts)))
    finally:
        if writer is not None:
            writer.close()
    if in_shard and progress:
        progress(dict(counts, shards=len(parts)))
    names = [shard_name(i, len(parts)) for i in range(len(parts))]
    for part, name in zip(parts, names):
        os.replace(part, os.path.join(folder, name))
    return dict(counts, shards=len(parts), files=names)
