"""Fine-tuning batches: length-bucketed training batches and in-order prediction."""

from __future__ import annotations

import numpy as np

BUCKET_CHUNK = 50  # batches per sorting chunk

# Batch lengths are rounded up to a multiple of this.  Every new batch shape costs a
# compilation (the training step's XLA kernels: dropout in float32, every fused stage in
# bf16/fp16), so a short run over real sentences would pay one for nearly every batch;
# multiples of 8 bound the shapes to max_seq_len / 8 at about 4 extra padded tokens a batch.
LENGTH_MULTIPLE = 8


def training_dataset(inputs, labels, batch_size, seed=0, length_multiple=LENGTH_MULTIPLE):
    """Shuffled, length-bucketed batches (`bert_keras.tasks.to_dataset`) of known cardinality,
    each cut to its longest member rounded up to ``length_multiple`` (1: exactly its longest);
    the featurizers' own padding values (0 ids, ignored labels) fill the extra positions."""
    import tensorflow as tf

    from bert_keras.tasks import to_dataset

    n = len(inputs["padding_mask"])
    ds = to_dataset(inputs, labels, batch_size, shuffle=True, seed=seed, bucket=BUCKET_CHUNK,
                    length_multiple=length_multiple)
    return ds.apply(tf.data.experimental.assert_cardinality(-(-n // batch_size)))


def predict(model, inputs, batch_size=64, progress=None):
    """Run ``model`` over batches in order; outputs padded back to the full length.

    One compiled graph for every batch length (`bert_keras.models.inference_function`),
    each batch cut to its longest member.  ``progress`` (a `bert_keras.progress.Progress`)
    counts the sequences done.
    """
    from bert_keras.models import inference_function
    from bert_keras.tasks import to_dataset

    full = np.asarray(inputs["padding_mask"]).shape[-1]
    fn = inference_function(model)
    names = list(model.input)
    chunks = []
    for batch in to_dataset(inputs, None, batch_size, shuffle=False, trim=True):
        out = fn({k: batch[k] for k in names})
        chunks.append({k: np.asarray(v) for k, v in out.items()} if isinstance(out, dict) else np.asarray(out))
        if progress is not None:
            progress.add(len(batch["padding_mask"]))
    if progress is not None:
        progress.update(progress.current, finalize=True)

    def join(parts, seq_axis_present):
        if not seq_axis_present:
            return np.concatenate(parts, axis=0)
        padded = []
        for p in parts:
            pad = [(0, 0)] * p.ndim
            pad[1] = (0, full - p.shape[1])
            padded.append(np.pad(p, pad, constant_values=-1e4))
        return np.concatenate(padded, axis=0)

    per_token = np.asarray(inputs["padding_mask"]).ndim == 2
    if isinstance(chunks[0], dict):
        return {k: join([c[k] for c in chunks], per_token and chunks[0][k].ndim >= 2) for k in chunks[0]}
    return join(chunks, per_token and chunks[0].ndim == 3)
