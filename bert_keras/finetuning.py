"""Fine-tuning runner: a pre-trained checkpoint + a task head trained with `model.fit`.

    from bert_keras import finetuning
    result = finetuning.finetune("classification", train_examples, dev_examples,
                                 init="path/to/checkpoint", model_dir="runs/sst2",
                                 epochs=3, batch_size=32, learning_rate=2e-5)

Tasks: "classification", "regression", "ner", "squad", "squad2", "multiple-choice";
training data are the examples of the `bert_keras.tasks` readers.  The optimiser
is the paper's (AdamW, weight decay 0.01 except LayerNorm/bias, 10% linear
warm-up then linear decay, clipping 1.0).  After every epoch the dev set is
scored with `bert_keras.metrics` (the official scripts' numbers); the best epoch
is saved with `save_checkpoint` under ``model_dir/best`` and the results go to
``model_dir/eval_results.json`` (percentages).

Batches are length-bucketed (`bert_keras.tasks.to_dataset` with ``bucket=50``):
each epoch shuffles the examples, sorts them by length inside chunks of 50
batches, cuts batches, shuffles the batch order, and pads every batch only to its
longest member.  Real sentences are short, so this avoids most of the compute
that padding to ``max_seq_len`` wastes.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Callable

import numpy as np

from bert_keras import metrics as bk_metrics
from bert_keras.choices import MIXED_PRECISION
from bert_keras.errors import BertKerasError
from bert_keras.task_names import FINETUNE_TASKS
from bert_keras.utils import write_json

TASKS = tuple(FINETUNE_TASKS)
BUCKET_CHUNK = 50  # batches per sorting chunk

MODEL_TASK = FINETUNE_TASKS  # fine-tuning task -> load_checkpoint task


# --------------------------------------------------------------------------- batching
# Batch lengths are rounded up to a multiple of this.  Every new batch shape costs a
# compilation (the training step's XLA kernels: dropout in float32, every fused stage in
# bf16/fp16), so a short run over real sentences would pay one for nearly every batch;
# multiples of 8 bound the shapes to max_seq_len / 8 at about 4 extra padded tokens a batch.
LENGTH_MULTIPLE = 8


def cut_to_length_multiple(batch, full_len, seq_rank, multiple=LENGTH_MULTIPLE):
    """Cuts every [.., full_len] array of a batch (a nest of tensors) to its longest member
    rounded up to ``multiple`` (at most full_len).  The featurizers' own padding values
    (0 ids, ignored labels) fill the extra positions."""
    import tensorflow as tf

    inputs = batch[0] if isinstance(batch, tuple) else batch
    lengths = tf.reduce_sum(tf.cast(inputs["padding_mask"], tf.int32), axis=-1)
    longest = tf.reduce_max(lengths)
    length = tf.minimum((longest + multiple - 1) // multiple * multiple, full_len)

    def cut(x):
        return x[..., :length] if x.shape.rank == seq_rank and x.shape[-1] == full_len else x

    return tf.nest.map_structure(cut, batch)


def training_dataset(inputs, labels, batch_size, seed=0, length_multiple=LENGTH_MULTIPLE):
    """Shuffled, length-bucketed batches (`bert_keras.tasks.to_dataset`) of known cardinality,
    each cut to its longest member rounded up to ``length_multiple`` (1: exactly its longest)."""
    import tensorflow as tf

    from bert_keras.tasks import to_dataset

    mask = np.asarray(inputs["padding_mask"])
    n = len(mask)
    ds = to_dataset(inputs, labels, batch_size, shuffle=True, seed=seed, bucket=BUCKET_CHUNK, trim=False)
    ds = ds.map(lambda *batch: cut_to_length_multiple(batch if len(batch) > 1 else batch[0], mask.shape[-1],
                                                      mask.ndim, length_multiple),
                num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    return ds.apply(tf.data.experimental.assert_cardinality(-(-n // batch_size)))


def predict(model, inputs, batch_size=64):
    """Run ``model`` over batches in order; outputs padded back to the full length.

    One compiled graph for every batch length (`bert_keras.models.inference_function`),
    each batch cut to its longest member.
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


# --------------------------------------------------------------------------- tasks
@dataclasses.dataclass
class PreparedTask:
    """What the generic loop needs from a task."""

    inputs: dict
    labels: object
    num_examples: int
    head_kwargs: dict
    loss: object
    metrics: list
    evaluate: Callable | None   # model -> dict of percentages
    key: str                    # metric that picks the best epoch
    metadata: dict
    loss_weights: object = None


def checkpoint_tokenizer(init, lower_case=None, announce=None):
    """The `BertTokenizer` of a checkpoint folder: its vocab.txt, and its casing as
    `bert_keras.checkpoints.casing.checkpoint_casing` finds it (recorded, Google's folder
    name, else inferred from the vocabulary).  `announce`: a stream (e.g. `sys.stdout`)
    that gets one line naming the casing and why, or None."""
    from bert_keras.checkpoints import open_checkpoint
    from bert_keras.checkpoints.casing import checkpoint_casing
    from bert_keras.text.tokenizer import BertTokenizer

    raw = open_checkpoint(init)
    if not raw.vocab_path:
        raise BertKerasError(f"{init}: no vocab.txt in the checkpoint folder")
    casing = checkpoint_casing(raw, lower_case)
    if announce is not None:
        print(f"{init}: {casing.describe()}", file=announce, flush=True)
    return BertTokenizer.from_vocab(raw.vocab_path, lower_case=casing.lower_case)


def classification_metrics(labels, logits, regression=False):
    """Percentages from logits: `bert_keras.metrics` classification or regression metrics."""
    if regression:
        return bk_metrics.regression_metrics(labels, np.asarray(logits).reshape(-1))
    return bk_metrics.classification_metrics(labels, np.argmax(logits, axis=-1))


def _prepare_classification(train, dev, tokenizer, max_seq_len, regression, label_map, batch_size):
    import keras

    from bert_keras.tasks import LabelMap, featurize_classification

    if label_map is None and not regression:
        label_map = LabelMap.from_examples(train)
    tr = featurize_classification(train, tokenizer, max_seq_len, label_map, regression) if train else None
    dv = featurize_classification(dev, tokenizer, max_seq_len, label_map, regression) if dev else None

    def evaluate(model):
        return classification_metrics(dv.labels, predict(model, dv.inputs, 2 * batch_size), regression)

    if regression:
        loss, metrics, key = keras.losses.MeanSquaredError(), [], "pearson"
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics, key = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")], "accuracy"
    return PreparedTask(tr and tr.inputs, tr and tr.labels, len(train or ()),
                        {"num_classes": 1 if regression else len(label_map)},
                        loss, metrics, evaluate if dv else None, key,
                        {"labels": None if regression else label_map.to_json()})


def _prepare_ner(train, dev, tokenizer, max_seq_len, label_map, batch_size):
    import keras

    from bert_keras.tasks import IGNORE_LABEL, LabelMap, featurize_token_classification, words_from_predictions

    if label_map is None:
        label_map = LabelMap(sorted({t for s in train for t in s.tags}))
    tr = featurize_token_classification(train, tokenizer, label_map, max_seq_len) if train else None
    dv = featurize_token_classification(dev, tokenizer, label_map, max_seq_len) if dev else None

    def evaluate(model):
        logits = predict(model, dv.inputs, 2 * batch_size)
        words = words_from_predictions(np.argmax(logits, -1), dv, label_map)
        return bk_metrics.ner_metrics([s.tags for s in dev], words)

    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE_LABEL)
    return PreparedTask(tr and tr.inputs, tr and tr.labels, len(train or ()), {"num_classes": len(label_map)},
                        loss, [],
                        evaluate if dv else None, "f1", {"labels": label_map.to_json()})


def _prepare_squad(train, dev, tokenizer, max_seq_len, version_2, batch_size, dev_dataset=None,
                   doc_stride=128, max_query_length=64):
    import keras

    from bert_keras.tasks import apply_null_threshold, featurize_squad, postprocess_squad

    tr = featurize_squad(train, tokenizer, max_seq_len, doc_stride, max_query_length, is_training=True) \
        if train else None
    dv = featurize_squad(dev, tokenizer, max_seq_len, doc_stride, max_query_length) if dev else None

    def evaluate(model):
        out = predict(model, dv.inputs, 2 * batch_size)
        preds = postprocess_squad(dev, dv, out["start_logits"], out["end_logits"],
                                  lower_case=tokenizer.lower_case, version_2=version_2, tokenizer=tokenizer)
        version = "2.0" if version_2 else "1.1"
        if version_2:
            # The paper's tau: the null-score threshold that maximises F1 on the evaluation set,
            # found by the official sweep over the best non-null answers.
            sweep = bk_metrics.squad_evaluate(dev_dataset, preds.best_non_null, version,
                                              na_probs=preds.null_score_diff)
            tau = sweep["best_f1_thresh"]
            return {**bk_metrics.squad_evaluate(dev_dataset, apply_null_threshold(preds, tau), version),
                    "null_threshold": tau}
        return bk_metrics.squad_evaluate(dev_dataset, preds.answers, version)

    sce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    labels = tr and {"start_logits": tr.start_positions, "end_logits": tr.end_positions}
    return PreparedTask(tr and tr.inputs, labels, len(tr) if tr else 0, {}, {"start_logits": sce, "end_logits": sce}, [],
                        evaluate if dv else None, "f1", {"version": "2.0" if version_2 else "1.1"},
                        loss_weights={"start_logits": 0.5, "end_logits": 0.5})


def _prepare_multiple_choice(train, dev, tokenizer, max_seq_len, batch_size):
    import keras

    from bert_keras.tasks import featurize_multiple_choice

    tr = featurize_multiple_choice(train, tokenizer, max_seq_len) if train else None
    dv = featurize_multiple_choice(dev, tokenizer, max_seq_len) if dev else None

    def evaluate(model):
        return bk_metrics.classification_metrics(dv.labels, np.argmax(predict(model, dv.inputs, batch_size), -1))

    return PreparedTask(tr and tr.inputs, tr and tr.labels, len(train or ()), {},
                        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                        [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                        evaluate if dv else None, "accuracy", {})


def prepare_task(task, train_examples, dev_examples, tokenizer, max_seq_len=128, label_map=None, batch_size=32,
                 dev_dataset=None, doc_stride=128, max_query_length=64) -> PreparedTask:
    """Featurize a task's train (may be None) and dev examples and pick its loss and metrics."""
    if task in ("classification", "regression"):
        prepared = _prepare_classification(train_examples, dev_examples, tokenizer, max_seq_len,
                                           task == "regression", label_map, batch_size)
    elif task == "ner":
        prepared = _prepare_ner(train_examples, dev_examples, tokenizer, max_seq_len, label_map, batch_size)
    elif task in ("squad", "squad2"):
        if dev_examples and dev_dataset is None:
            raise BertKerasError("SQuAD evaluation needs dev_dataset (the dev JSON)")
        prepared = _prepare_squad(train_examples, dev_examples, tokenizer, max_seq_len, task == "squad2",
                                  batch_size, dev_dataset, doc_stride, max_query_length)
    else:
        prepared = _prepare_multiple_choice(train_examples, dev_examples, tokenizer, max_seq_len, batch_size)

    return prepared


# --------------------------------------------------------------------------- the loop
# What finetune writes into model_dir (and all that overwrite=True removes).
OUTPUTS = ("best", "eval_results.json", "history.json")


def prepare_model_dir(model_dir, overwrite=False, init=None) -> None:
    """Make sure no previous run's outputs can pass for this run's.

    A non-empty ``model_dir`` is refused unless ``overwrite``; then the
    previous run's `OUTPUTS` are removed before training starts (so a run
    that dies early leaves no stale ``best/`` or ``eval_results.json``),
    and every other file in the folder is kept.  ``best/`` is removed only
    when it is a bert-keras checkpoint folder, and never when ``init`` is
    (inside) it.

    Raises:
      BertKerasError: one line naming the folder and what is in the way.
    """
    import shutil

    from bert_keras.checkpoints import check_replaceable

    model_dir = os.fspath(model_dir)
    if not os.path.isdir(model_dir):
        if os.path.lexists(model_dir):
            raise BertKerasError(f"{model_dir}: exists and is not a folder")
        return
    present = sorted(os.listdir(model_dir))
    if not present:
        return
    if not overwrite:
        raise BertKerasError(f"{model_dir}: folder is not empty (holds {present[0]!r}); choose a new folder, or "
                             "pass --overwrite (overwrite=True) to replace a previous run's outputs")
    best = os.path.join(model_dir, "best")
    if init is not None and os.path.lexists(best):
        real_init, real_best = os.path.realpath(os.fspath(init)), os.path.realpath(best)
        if real_init == real_best or real_init.startswith(real_best + os.sep):
            raise BertKerasError(f"{init}: the initial checkpoint is the previous run's {best}, which --overwrite "
                                 "would delete; copy it elsewhere or choose another --model-dir")
    if os.path.lexists(best):
        if not os.path.isdir(best) or os.path.islink(best):
            raise BertKerasError(f"{best}: not a checkpoint folder; refusing to delete it")
        check_replaceable(best)
    for name in OUTPUTS[1:]:
        path = os.path.join(model_dir, name)
        if os.path.isfile(path):
            os.remove(path)  # first: results must never outlive the checkpoint they describe
    if os.path.isdir(best):
        shutil.rmtree(best)


def finetune(task, train_examples, dev_examples, init, model_dir, epochs=3, batch_size=32, learning_rate=5e-5,
             max_seq_len=128, seed=0, weight_decay=0.01, warmup_fraction=0.1, clipnorm=1.0,
             mixed_precision=None, label_map=None, lower_case=None, dropout=None, dev_dataset=None,
             doc_stride=128, max_query_length=64, verbose=1, callbacks=None, overwrite=False):
    """Fine-tune ``init`` on a task and keep the best epoch on the dev set.

    A previous run's outputs never look current: a non-empty ``model_dir``
    is refused unless ``overwrite``, which removes the previous ``best/``,
    ``eval_results.json`` and ``history.json`` (only those) before training
    (`prepare_model_dir`).  ``best/`` is written as a whole each time an
    epoch improves (`save_checkpoint`), the two JSON files atomically at the
    end.

    Args:
        task: one of `TASKS`.
        train_examples, dev_examples: examples from the `bert_keras.tasks` readers
            (dev may be None: the last epoch is kept).
        init: any folder `load_checkpoint` reads.
        model_dir: output: ``best/`` (loadable by `load_checkpoint` and `bert-keras
            export`), ``eval_results.json``, ``history.json``.
        mixed_precision: None/"none", "bf16" or "fp16".
        dev_dataset: SQuAD only: the dev JSON (dict) for the official metrics.
        overwrite: replace a previous run's outputs in a non-empty ``model_dir``.

    Returns:
        dict: best dev metrics (percentages), epoch, train_seconds,
        train_examples_per_second, paths.
    """
    import keras

    from bert_keras.checkpoints import load_checkpoint, save_checkpoint
    from bert_keras.training.optimization import create_optimizer

    if task not in TASKS:
        raise BertKerasError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    if mixed_precision is not None and mixed_precision not in MIXED_PRECISION:
        raise BertKerasError(f"unknown mixed precision {mixed_precision!r}; choose {', '.join(MIXED_PRECISION)}")
    train_examples = list(train_examples)
    dev_examples = list(dev_examples) if dev_examples else None
    if not train_examples:
        raise BertKerasError("no training examples")
    prepare_model_dir(model_dir, overwrite, init)
    keras.utils.set_random_seed(seed)
    policy = MIXED_PRECISION.get(mixed_precision)

    tokenizer = checkpoint_tokenizer(init, lower_case, announce=sys.stdout if verbose else None)

    prepared = prepare_task(task, train_examples, dev_examples, tokenizer, max_seq_len, label_map, batch_size,
                            dev_dataset, doc_stride, max_query_length)
    head_kwargs = dict(prepared.head_kwargs)
    if dropout is not None:
        head_kwargs["dropout"] = dropout
    model = load_checkpoint(init, task=MODEL_TASK[task], dtype=policy, **head_kwargs)
    n = len(prepared.inputs["padding_mask"])
    steps_per_epoch = -(-n // batch_size)
    optimizer = create_optimizer("adamw", learning_rate, total_steps=steps_per_epoch * epochs,
                                 warmup_fraction=warmup_fraction, weight_decay=weight_decay, clipnorm=clipnorm,
                                 loss_scale=mixed_precision == "fp16")
    model.compile(optimizer=optimizer, loss=prepared.loss, loss_weights=prepared.loss_weights,
                  metrics=prepared.metrics or None)
    dataset = training_dataset(prepared.inputs, prepared.labels, batch_size, seed=seed)

    os.makedirs(model_dir, exist_ok=True)
    best_dir = os.path.join(model_dir, "best")
    metadata = {**prepared.metadata, "task": task, "max_seq_len": max_seq_len, "lower_case": tokenizer.lower_case}
    best, history, train_seconds = None, [], 0.0
    for epoch in range(epochs):
        start = time.perf_counter()
        fit = model.fit(dataset, epochs=epoch + 1, initial_epoch=epoch, verbose=verbose, callbacks=callbacks,
                        shuffle=False)  # the dataset shuffles and buckets itself
        train_seconds += time.perf_counter() - start
        record = {"epoch": epoch + 1, **{k: float(v[-1]) for k, v in fit.history.items()}}
        if prepared.evaluate is not None:
            scores = prepared.evaluate(model)
            record.update({f"eval_{k}": v for k, v in scores.items()})
            if best is None or scores[prepared.key] > best[prepared.key]:
                best = {**scores, "epoch": epoch + 1}
                save_checkpoint(model, best_dir, lower_case=tokenizer.lower_case, metadata=metadata)
        history.append(record)
        if verbose:
            print(f"epoch {epoch + 1}: " + ", ".join(f"{k}={v:.4g}" for k, v in record.items() if k != "epoch"))
    if prepared.evaluate is None:
        save_checkpoint(model, best_dir, lower_case=tokenizer.lower_case, metadata=metadata)
    result = {
        "task": task,
        **(best or {}),
        "train_seconds": train_seconds,
        "train_examples_per_second": n * epochs / train_seconds,
        "num_train_examples": len(train_examples), "num_train_features": n,
        "num_eval_examples": len(dev_examples) if dev_examples else 0,
        "best_checkpoint": best_dir, "mixed_precision": mixed_precision or "none",
    }
    write_json(os.path.join(model_dir, "eval_results.json"), result)
    write_json(os.path.join(model_dir, "history.json"), history)
    result["history"] = history
    result["model"] = model
    return result


def evaluate(model_dir, eval_examples, task=None, batch_size=64, dev_dataset=None, max_seq_len=None,
             doc_stride=128, max_query_length=64, lower_case=None):
    """Score a folder written by `finetune` (its ``best/``) on labelled examples.

    The task, label set, casing and sequence length come from the folder's
    metadata (`lower_case` overrides the casing; the choice is named on
    stderr, stdout being the metrics).  Returns the metrics dict (percentages).
    """
    from bert_keras.checkpoints import load_checkpoint, open_checkpoint
    from bert_keras.tasks import LabelMap

    raw = open_checkpoint(model_dir)
    meta = (raw.meta.get("metadata") or {}) if raw.flavor == "bert_keras" else {}
    task = task or meta.get("task")
    if task not in TASKS:
        raise BertKerasError(f"{model_dir}: unknown task {task!r}; pass one of {', '.join(TASKS)}")
    labels = meta.get("labels")
    label_map = LabelMap(labels) if labels else None
    if task in ("classification", "ner") and label_map is None:
        raise BertKerasError(f"{model_dir}: no label set recorded; evaluate a folder written by finetune")
    tokenizer = checkpoint_tokenizer(model_dir, lower_case, announce=sys.stderr)
    prepared = prepare_task(task, None, list(eval_examples), tokenizer, max_seq_len or meta.get("max_seq_len", 128),
                            label_map, batch_size, dev_dataset, doc_stride, max_query_length)
    model = load_checkpoint(model_dir, task=MODEL_TASK[task])
    return prepared.evaluate(model)


def finetune_classification(train_examples, dev_examples, init, model_dir, regression=False, **kwargs):
    """`finetune` for "classification" (or "regression" when ``regression``)."""
    return finetune("regression" if regression else "classification", train_examples, dev_examples, init,
                    model_dir, **kwargs)
