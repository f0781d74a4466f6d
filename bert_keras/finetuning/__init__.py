"""Fine-tuning runner: a pre-trained checkpoint + a task head trained with `model.fit`.

Modules: this one (the loop: `finetune`, `evaluate`), `prepare` (per-task
features, heads, losses and dev scoring), `batches` (training batches, `predict`).

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

import math
import os
import sys
import time

from bert_keras.choices import MIXED_PRECISION
from bert_keras.errors import BertKerasError
from bert_keras.finetuning.batches import BUCKET_CHUNK, LENGTH_MULTIPLE, predict, training_dataset  # noqa: F401
from bert_keras.finetuning.prepare import PreparedTask, classification_metrics, prepare_task  # noqa: F401
from bert_keras.task_names import FINETUNE_TASKS
from bert_keras.locks import writes
from bert_keras.writing import write_json

TASKS = tuple(FINETUNE_TASKS)
MODEL_TASK = FINETUNE_TASKS  # fine-tuning task -> load_checkpoint task


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


@writes("model_dir")
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

    if task not in TASKS:
        raise BertKerasError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    if mixed_precision is not None and mixed_precision not in MIXED_PRECISION:
        raise BertKerasError(f"unknown mixed precision {mixed_precision!r}; choose {', '.join(MIXED_PRECISION)}")
    check_hyperparameters(epochs=epochs, batch_size=batch_size, learning_rate=learning_rate,
                          max_seq_len=max_seq_len, weight_decay=weight_decay, warmup_fraction=warmup_fraction,
                          clipnorm=clipnorm)
    train_examples = list(train_examples)
    dev_examples = list(dev_examples) if dev_examples else None
    if not train_examples:
        raise BertKerasError("no training examples")
    prepare_model_dir(model_dir, overwrite, init)
    keras.utils.set_random_seed(seed)

    tokenizer = checkpoint_tokenizer(init, lower_case, announce=sys.stdout if verbose else None)
    prepared = prepare_task(task, train_examples, dev_examples, tokenizer, max_seq_len, label_map, batch_size,
                            dev_dataset, doc_stride, max_query_length)
    n = len(prepared.inputs["padding_mask"])
    model = _compiled_model(task, init, prepared, dropout=dropout, mixed_precision=mixed_precision,
                            total_steps=-(-n // batch_size) * epochs, learning_rate=learning_rate,
                            warmup_fraction=warmup_fraction, weight_decay=weight_decay, clipnorm=clipnorm)
    dataset = training_dataset(prepared.inputs, prepared.labels, batch_size, seed=seed)

    os.makedirs(model_dir, exist_ok=True)
    best_dir = os.path.join(model_dir, "best")
    metadata = {**prepared.metadata, "task": task, "max_seq_len": max_seq_len, "lower_case": tokenizer.lower_case}
    best, history, train_seconds = _train_epochs(model, dataset, prepared, epochs, best_dir, metadata,
                                                 tokenizer.lower_case, verbose, callbacks)
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


def _compiled_model(task, init, prepared, *, dropout, mixed_precision, total_steps, learning_rate,
                    warmup_fraction, weight_decay, clipnorm):
    """The checkpoint with the task's head, compiled with the paper's AdamW schedule."""
    from bert_keras.checkpoints import load_checkpoint
    from bert_keras.training.optimization import create_optimizer

    head_kwargs = dict(prepared.head_kwargs)
    if dropout is not None:
        head_kwargs["dropout"] = dropout
    model = load_checkpoint(init, task=MODEL_TASK[task], dtype=MIXED_PRECISION.get(mixed_precision),
                            **head_kwargs)
    optimizer = create_optimizer("adamw", learning_rate, total_steps=total_steps,
                                 warmup_fraction=warmup_fraction, weight_decay=weight_decay, clipnorm=clipnorm,
                                 loss_scale=mixed_precision == "fp16")
    model.compile(optimizer=optimizer, loss=prepared.loss, loss_weights=prepared.loss_weights,
                  metrics=prepared.metrics or None)
    return model


def _finite_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_hyperparameters(*, epochs, batch_size, learning_rate, max_seq_len, weight_decay, warmup_fraction,
                          clipnorm=None):
    """Refuse, in one line naming the option and its value, what would train nothing or garbage."""
    def bad(name, value, rule):
        flag = "--" + name.replace("_", "-")
        raise BertKerasError(f"{name} ({flag}) must be {rule}, got {value!r}")

    if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1:
        bad("epochs", epochs, "an integer >= 1")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        bad("batch_size", batch_size, "an integer >= 1")
    if not isinstance(max_seq_len, int) or isinstance(max_seq_len, bool) or not 3 <= max_seq_len <= 512:
        bad("max_seq_len", max_seq_len, "an integer in 3..512 (BERT's position embeddings hold 512)")
    if not _finite_number(learning_rate) or learning_rate <= 0:
        bad("learning_rate", learning_rate, "a finite number > 0")
    if not _finite_number(weight_decay) or weight_decay < 0:
        bad("weight_decay", weight_decay, "a finite number >= 0")
    if not _finite_number(warmup_fraction) or not 0 <= warmup_fraction <= 1:
        bad("warmup_fraction", warmup_fraction, "a number in [0, 1]")
    if clipnorm is not None and (not _finite_number(clipnorm) or clipnorm <= 0):
        bad("clipnorm", clipnorm, "a finite number > 0 (or None)")


def _stop_on_non_finite_loss():
    import keras

    class StopOnNonFiniteLoss(keras.callbacks.Callback):
        """Stops ``fit`` at the first batch whose loss is NaN or infinite, and remembers it."""

        bad = None

        def on_train_batch_end(self, batch, logs=None):
            loss = (logs or {}).get("loss")
            if loss is not None and not math.isfinite(float(loss)):
                self.bad = (batch + 1, float(loss))
                self.model.stop_training = True

    return StopOnNonFiniteLoss()


def _train_epochs(model, dataset, prepared, epochs, best_dir, metadata, lower_case, verbose, callbacks):
    """Fits epoch by epoch, scoring the dev set after each and saving the best epoch (the
    last one without a dev set) to best_dir.  Returns (best scores or None, history, seconds).

    Stops at the first non-finite training loss with one line (`BertKerasError`): nothing
    trained after it is saved, and best_dir keeps the best epoch before it, if any."""
    from bert_keras.checkpoints import save_checkpoint
    from bert_keras.progress import fit_progress

    fit_verbose, plain = fit_progress(verbose)  # plain lines, not Keras' bar, when stdout is a log
    guard = _stop_on_non_finite_loss()
    callbacks = [guard, *plain, *(callbacks or [])]
    best, history, train_seconds = None, [], 0.0
    for epoch in range(epochs):
        start = time.perf_counter()
        fit = model.fit(dataset, epochs=epoch + 1, initial_epoch=epoch, verbose=fit_verbose, callbacks=callbacks,
                        shuffle=False)  # the dataset shuffles and buckets itself
        train_seconds += time.perf_counter() - start
        if guard.bad is not None:
            step, loss = guard.bad
            kept = (f"{best_dir} keeps epoch {best['epoch']}, the best before it" if best is not None
                    else "nothing was saved")
            raise BertKerasError(f"epoch {epoch + 1}, step {step}: the training loss is {loss} (not finite): "
                                 f"training stopped and {kept}; lower --learning-rate, or check the labels")
        record = {"epoch": epoch + 1, **{k: float(v[-1]) for k, v in fit.history.items()}}
        if prepared.evaluate is not None:
            scores = prepared.evaluate(model)
            record.update({f"eval_{k}": v for k, v in scores.items()})
            score = scores[prepared.key]
            if not math.isfinite(score):  # a NaN score is never a best epoch
                pass
            elif best is None or score > best[prepared.key]:
                best = {**scores, "epoch": epoch + 1}
                save_checkpoint(model, best_dir, lower_case=lower_case, metadata=metadata)
        history.append(record)
        if verbose:
            print(f"epoch {epoch + 1}: " + ", ".join(f"{k}={v:.4g}" for k, v in record.items() if k != "epoch"))
    if prepared.evaluate is None:
        save_checkpoint(model, best_dir, lower_case=lower_case, metadata=metadata)
    elif best is None:
        raise BertKerasError(f"the dev {prepared.key} was NaN after every epoch (check the dev set's labels): "
                             "no epoch was kept, nothing was saved")
    return best, history, train_seconds


def evaluate(model_dir, eval_examples, task=None, batch_size=64, dev_dataset=None, max_seq_len=None,
             doc_stride=128, max_query_length=64, lower_case=None, progress=False):
    """Score a folder written by `finetune` (its ``best/``) on labelled examples.

    The task, label set, casing and sequence length come from the folder's
    metadata (`lower_case` overrides the casing; the choice is named on
    stderr, stdout being the metrics).  ``progress``: plain progress lines on
    stderr (sequences done, rate, ETA).  Returns the metrics dict (percentages).
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
    if not progress:
        return prepared.evaluate(model)
    from bert_keras.progress import Progress

    return prepared.evaluate(model, Progress(None, unit_name="sequence", stream=sys.stderr))
