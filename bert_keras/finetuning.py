"""Fine-tuning runner: a pre-trained checkpoint + a task head trained with `model.fit`.

    from bert_keras import finetuning
    result = finetuning.finetune_classification(
        train_examples, dev_examples, init="path/to/checkpoint", model_dir="runs/sst2",
        epochs=3, batch_size=32, learning_rate=2e-5)

Batches are length-bucketed: each epoch shuffles the examples, sorts them by
length inside chunks of 50 batches, cuts batches and shuffles the batch order,
and every batch is padded only to its longest member.  Real sentences are short,
so this avoids most of the compute that padding to ``max_seq_len`` wastes.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from bert_keras import metrics as bk_metrics
from bert_keras.errors import BertKerasError

BUCKET_CHUNK = 50  # batches per sorting chunk


def bucketed_dataset(inputs, labels, lengths, batch_size, shuffle=True, seed=0, chunk=BUCKET_CHUNK):
    """tf.data.Dataset of (inputs, labels) batches, length-bucketed and padded per batch.

    Args:
        inputs: dict of int32 arrays [N, L] (token_ids, segment_ids, padding_mask).
        labels: array [N] (int32 classes / float32 targets) or [N, L] per-token labels, or None.
        lengths: int [N] real lengths.
        shuffle: new order every epoch (seeded); False keeps file order (evaluation).
    """
    import tensorflow as tf

    n = len(lengths)
    lengths = np.asarray(lengths)
    per_token = labels is not None and np.ndim(labels) == 2
    epoch = [0]

    def batches():
        rng = np.random.default_rng([seed, epoch[0]])
        epoch[0] += 1
        if not shuffle:
            return [np.arange(i, min(i + batch_size, n)) for i in range(0, n, batch_size)]
        order = rng.permutation(n)
        out = []
        step = batch_size * chunk
        for start in range(0, n, step):
            part = order[start:start + step]
            part = part[np.argsort(lengths[part], kind="stable")]
            out += [part[i:i + batch_size] for i in range(0, len(part), batch_size)]
        return [out[i] for i in rng.permutation(len(out))]

    def generate():
        for idx in batches():
            length = int(lengths[idx].max())
            feats = {k: v[idx, :length] for k, v in inputs.items()}
            if labels is None:
                yield feats
            else:
                yield feats, (labels[idx, :length] if per_token else labels[idx])

    spec = {k: tf.TensorSpec((None, None), tf.int32) for k in inputs}
    if labels is not None:
        label_spec = tf.TensorSpec((None, None) if per_token else (None,), tf.as_dtype(labels.dtype))
        spec = (spec, label_spec)
    ds = tf.data.Dataset.from_generator(generate, output_signature=spec)
    ds = ds.apply(tf.data.experimental.assert_cardinality(-(-n // batch_size)))
    return ds.prefetch(tf.data.AUTOTUNE)


def load_tokenizer(model, init, lower_case=None):
    """The checkpoint's own vocabulary; casing from the checkpoint when it records it."""
    from bert_keras.text.tokenizer import BertTokenizer

    vocab = getattr(model, "vocab_path", None)
    if not vocab:
        raise BertKerasError(f"{init}: no vocab.txt in the checkpoint folder")
    if lower_case is None:
        lower_case = getattr(model, "lower_case", None)
    if lower_case is None:
        cfg = os.path.join(os.path.dirname(vocab), "tokenizer_config.json")
        if os.path.exists(cfg):
            with open(cfg, encoding="utf-8") as f:
                lower_case = json.load(f).get("do_lower_case")
    if lower_case is None:
        lower_case = True  # the common case (bert-base-uncased and most compact models)
    return BertTokenizer.from_vocab(vocab, lower_case=bool(lower_case))


def classification_metrics(labels, logits, regression=False):
    """Percentages from logits: `bert_keras.metrics` classification or regression metrics."""
    if regression:
        return bk_metrics.regression_metrics(labels, np.asarray(logits).reshape(-1))
    return bk_metrics.classification_metrics(labels, np.argmax(logits, axis=-1))


def _predict(model, features, batch_size):
    ds = bucketed_dataset(features.inputs, None, features.lengths, batch_size, shuffle=False)
    return np.concatenate([np.asarray(model(batch, training=False)) for batch in ds], axis=0)


def finetune_classification(train_examples, dev_examples, init, model_dir, regression=False, epochs=3,
                            batch_size=32, learning_rate=5e-5, max_seq_len=128, seed=0, weight_decay=0.01,
                            warmup_fraction=0.1, clipnorm=1.0, mixed_precision=None, label_map=None,
                            lower_case=None, dropout=None, verbose=1, history_callback=None):
    """Fine-tune a classifier (or regressor) and keep the best epoch on the dev set.

    Args:
        train_examples, dev_examples: `bert_keras.tasks.InputExample` lists (dev may be None).
        init: any folder `load_checkpoint` reads.
        model_dir: output; ``best/`` (save_checkpoint of the best epoch),
            ``eval_results.json`` (percentages) and ``history.json``.
        mixed_precision: None/"none", "bf16" or "fp16".

    Returns:
        dict with the best dev metrics, train time, examples/s and paths.
    """
    import keras

    from bert_keras.checkpoints import load_checkpoint, save_checkpoint
    from bert_keras.tasks import LabelMap, featurize_classification
    from bert_keras.training.optimization import create_optimizer

    keras.utils.set_random_seed(seed)
    policy = {None: None, "none": None, "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}[mixed_precision]
    train_examples = list(train_examples)
    if label_map is None and not regression:
        label_map = LabelMap.from_examples(train_examples)
    num_classes = 1 if regression else len(label_map)
    model = load_checkpoint(init, task="classification", num_classes=num_classes, dtype=policy,
                            **({} if dropout is None else {"dropout": dropout}))
    tokenizer = load_tokenizer(model, init, lower_case)
    train = featurize_classification(train_examples, tokenizer, max_seq_len, label_map, regression)
    dev = featurize_classification(list(dev_examples), tokenizer, max_seq_len, label_map, regression) \
        if dev_examples else None

    steps_per_epoch = -(-len(train_examples) // batch_size)
    optimizer = create_optimizer("adamw", learning_rate, total_steps=steps_per_epoch * epochs,
                                 warmup_fraction=warmup_fraction, weight_decay=weight_decay, clipnorm=clipnorm,
                                 loss_scale=mixed_precision == "fp16")
    if regression:
        model.compile(optimizer=optimizer, loss=keras.losses.MeanSquaredError())
    else:
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
    dataset = bucketed_dataset(train.inputs, train.labels, train.lengths, batch_size, shuffle=True, seed=seed)

    os.makedirs(model_dir, exist_ok=True)
    key = "pearson" if regression else "accuracy"
    best, history, train_seconds = None, [], 0.0
    metadata = {"task": "regression" if regression else "classification", "max_seq_len": max_seq_len,
                "labels": None if regression else label_map.to_json(), "lower_case": tokenizer.lower_case}
    for epoch in range(epochs):
        start = time.perf_counter()
        fit = model.fit(dataset, epochs=epoch + 1, initial_epoch=epoch, verbose=verbose,
                        callbacks=[history_callback] if history_callback else None)
        train_seconds += time.perf_counter() - start
        record = {"epoch": epoch + 1, **{k: float(v[-1]) for k, v in fit.history.items()}}
        if dev is not None:
            scores = classification_metrics(dev.labels, _predict(model, dev, 2 * batch_size), regression)
            record.update({f"eval_{k}": v for k, v in scores.items()})
            if best is None or scores[key] > best[key]:
                best = {**scores, "epoch": epoch + 1}
                save_checkpoint(model, os.path.join(model_dir, "best"), vocab_path=tokenizer_vocab(model),
                                lower_case=tokenizer.lower_case, metadata=metadata)
        history.append(record)
        if verbose:
            print("epoch", epoch + 1, {k: round(v, 4) for k, v in record.items() if k != "epoch"})
    if dev is None:
        save_checkpoint(model, os.path.join(model_dir, "best"), vocab_path=tokenizer_vocab(model),
                        lower_case=tokenizer.lower_case, metadata=metadata)
    result = {
        **(best or {}),
        "train_seconds": train_seconds,
        "train_examples_per_second": len(train_examples) * epochs / train_seconds,
        "num_train": len(train_examples), "num_eval": len(dev_examples) if dev_examples else 0,
        "truncated_train": train.truncated, "model_dir": str(model_dir),
        "best_checkpoint": os.path.join(str(model_dir), "best"),
        "mixed_precision": mixed_precision or "none",
    }
    _write_json(os.path.join(model_dir, "eval_results.json"), result)
    _write_json(os.path.join(model_dir, "history.json"), history)
    result["history"] = history
    return result


def tokenizer_vocab(model):
    return getattr(model, "vocab_path", None)


def _write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
