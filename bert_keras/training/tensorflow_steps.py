"""What the pre-training runner (`runner.Run`) is handed on TensorFlow: a `tf.distribute` strategy
and `BertPretrainer`'s Keras-compiled training step on it.

Each replica reads its own shard of the data (`strategy.distribute_datasets_from_function`, files
split by input pipeline), k micro-batches stacked per optimiser step; one call (`train_steps`)
runs ``steps_per_call`` optimiser steps, each a ``strategy.run`` of the model's Keras train step
(`BertPretrainer.train_step`, i.e. `bert_keras.models.tensorflow_step.train_step`: the global
batch's loss and global-norm clip).  Not ``fit``: Keras 3's ``fit`` fails under
MultiWorkerMirroredStrategy (``Attempt to convert a value (PerReplica...) to a Tensor``) and has
open TPUStrategy reports (keras-team/keras#19448), and its ``steps_per_execution`` loop fails
under MirroredStrategy (keras-team/keras#19246); the step called this way works under the
default, Mirrored, MultiWorkerMirrored and TPU strategies alike.
"""

from __future__ import annotations

import contextlib
import functools

import tensorflow as tf

import numpy as np

from bert_keras.models import tensorflow_step
from bert_keras.training import distribute
from bert_keras.training.optimization import create_optimizer


class TensorFlowSteps:
    """The TensorFlow side of a run (see the module docstring and `runner.Run`)."""

    torch_rng = False
    accumulation = 1  # the step accumulates its micro-batches itself: the optimiser counts optimiser steps
    reads_earlier_format = True
    unreadable = (tf.errors.OpError, IndexError)

    def __init__(self, cfg, strategy=None):
        self.cfg = cfg
        self.strategy = strategy or distribute.resolve_strategy(cfg.strategy, cfg.tpu)
        self.chief = distribute.is_chief(self.strategy)
        self.replicas = self.strategy.num_replicas_in_sync
        self.name = type(self.strategy).__name__
        # several workers must stop together, which a signal to one cannot arrange
        self.stops_alone = not isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)
        self.evaluates_here = self.chief
        self.steps_per_call = cfg.steps_per_call

    def active(self):
        return contextlib.nullcontext()

    def describe(self):
        """The run's first line: which backend and devices train."""
        try:
            devices = ", ".join(self.strategy.extended.worker_devices)
        except RuntimeError:  # the default strategy: this process's default device
            devices = "the CPU" if not tf.config.list_logical_devices("GPU") else "the first GPU"
        name = "default strategy" if self.strategy is tf.distribute.get_strategy() else self.name
        return f"backend: tensorflow, {name}, {self.replicas} replica(s) on {devices}"

    def scope(self):
        return self.strategy.scope()

    def optimizer(self, schedule):
        cfg = self.cfg  # with several replicas the step clips the summed gradient to clipnorm
        return create_optimizer(cfg.optimizer, schedule, weight_decay=cfg.weight_decay, clipnorm=cfg.clipnorm,
                                beta_1=cfg.beta_1, beta_2=cfg.beta_2, epsilon=cfg.epsilon,
                                loss_scale=cfg.mixed_precision == "fp16", adam_rule=cfg.adam_rule)

    def prepare(self, model, optimizer):
        self.model, self.train_function = model, None
        with self.strategy.scope():  # the metrics' variables, one per replica
            model.compile(optimizer=optimizer, jit_compile=False)  # jit_compile: per micro-batch (train)

    def restored(self, model, optimizer):
        pass

    def phase_batches(self, files, spec, phase, done):
        """The distributed iterator of ``phase``, positioned after the ``done`` optimiser steps."""
        from bert_keras.data import pretraining_dataset

        cfg = self.cfg
        self.train_function = train_function(self.model, cfg.jit_compile)  # a new trace for the phase's shapes
        seq_len, max_pred = cfg.phase_seq_len(phase), cfg.phase_max_predictions(phase)
        accumulation = cfg.phase_accumulation(phase)
        micro_global = cfg.phase_batch_size(phase) // accumulation

        def dataset_fn(input_context):
            ds = pretraining_dataset(
                files, spec.vocab_path, seq_len=seq_len, max_predictions=max_pred,
                batch_size=input_context.get_per_replica_batch_size(micro_global),
                lower_case=spec.lower_case, whole_word_masking=cfg.whole_word_masking,
                seed=cfg.seed * 1000 + phase, input_context=input_context)
            # The input position: micro-batches this pipeline fed before the checkpoint.
            per_step = accumulation * input_context.num_replicas_in_sync // input_context.num_input_pipelines
            ds = ds.skip(done * per_step) if done else ds
            # the k micro-batches of one optimiser step, stacked (the step splits them)
            return ds.batch(accumulation, drop_remainder=True) if accumulation > 1 else ds

        return iter(self.strategy.distribute_datasets_from_function(dataset_fn))

    def train(self, iterator, steps):
        """``steps`` optimiser steps in one call; their statistics (`run_files.STATS`), summed."""
        return train_steps(self.model, iterator, steps, self.train_function)

    def forward(self, model):
        return None  # the chief evaluates alone, on its own device


def train_function(model, jit_compile=False):
    """A `tf.function` ``(iterator, steps)`` that runs ``steps`` optimiser steps of a compiled
    `BertPretrainer` on ``iterator``: the model's train step
    (`bert_keras.models.tensorflow_step.train_step`, each micro-batch XLA-compiled with
    ``jit_compile``) under ``strategy.run``, ``steps`` times (the count is an argument: one trace
    serves every count).  Not Keras' own ``steps_per_execution`` loop: under MirroredStrategy its
    ``tf.cond`` around the optimiser update fails ("You must feed a value for placeholder
    tensor", keras-team/keras#19246)."""
    strategy = model.distribute_strategy
    # the step is plain Python over static shapes, as Keras runs it (no autograph)
    step = tf.autograph.experimental.do_not_convert(
        functools.partial(tensorflow_step.train_step, model, xla_micro_steps=jit_compile))

    @tf.function
    def train(iterator, steps):
        for _ in tf.range(steps):
            strategy.run(step, args=(next(iterator),))

    return train


def train_steps(model, iterator, steps, train=None, jit_compile=False):
    """Runs ``steps`` optimiser steps of a compiled `BertPretrainer` on ``iterator`` in one call and
    returns their statistics (`statistics`).  ``train``: a `train_function` of ``model`` to reuse
    (traced once); None builds one with ``jit_compile``."""
    train = train or train_function(model, jit_compile)
    model.reset_metrics()
    train(iterator, tf.constant(steps, tf.int32))
    return statistics(model, steps)


def statistics(model, steps):
    """The statistics (`run_files.STATS`) of the ``steps`` optimiser steps since the metrics' reset,
    summed over the steps, from the model's metrics (`bert_keras.models.tensorflow_step`)."""
    metrics = {m.name: m for m in model.metrics}
    means = [float(metrics[name].result()) * steps for name in ("loss", "mlm_loss", "nsp_loss")]
    counts = [float(v.numpy()) for name in ("mlm_accuracy", "nsp_accuracy")
              for v in (metrics[name].total, metrics[name].count)]
    return np.asarray(means + counts, np.float64)
