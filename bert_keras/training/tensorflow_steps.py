"""What the pre-training runner (`runner.Run`) is handed on TensorFlow: a `tf.distribute` strategy
and `loop.PretrainLoop` on it.

Each replica reads its own shard of the data (`strategy.distribute_datasets_from_function`, files
split by input pipeline), and one call of the loop's `tf.function` runs ``steps_per_call``
optimiser steps, each a ``strategy.run`` of one replica step.  Why not Keras' ``fit``: Keras 3's
``fit`` fails under MultiWorkerMirroredStrategy (``Attempt to convert a value (PerReplica...) to a
Tensor``) and has open TPUStrategy reports (keras-team/keras#19448); the loop works under the
default, Mirrored, MultiWorkerMirrored and TPU strategies alike.
"""

from __future__ import annotations

import contextlib

import tensorflow as tf

from bert_keras.training import distribute
from bert_keras.training.loop import PretrainLoop
from bert_keras.training.optimization import create_optimizer


class TensorFlowSteps:
    """The TensorFlow side of a run (see the module docstring and `runner.Run`)."""

    torch_rng = False
    accumulation = 1  # the loop's optimiser counts optimiser steps
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
        cfg = self.cfg  # the loop clips the global gradient itself and accumulates micro-batches
        return create_optimizer(cfg.optimizer, schedule, weight_decay=cfg.weight_decay, clipnorm=None,
                                beta_1=cfg.beta_1, beta_2=cfg.beta_2, epsilon=cfg.epsilon,
                                loss_scale=cfg.mixed_precision == "fp16", adam_rule=cfg.adam_rule)

    def prepare(self, model, optimizer):
        self.loop = PretrainLoop(model, optimizer, self.strategy, clipnorm=self.cfg.clipnorm,
                                 jit_compile=self.cfg.jit_compile)

    def restored(self, model, optimizer):
        pass

    def phase_batches(self, files, spec, phase, done):
        """The distributed iterator of ``phase``, positioned after the ``done`` optimiser steps."""
        from bert_keras.data import pretraining_dataset

        cfg = self.cfg
        seq_len, max_pred = cfg.phase_seq_len(phase), cfg.phase_max_predictions(phase)
        accumulation = cfg.phase_accumulation(phase)
        micro_global = cfg.phase_batch_size(phase) // accumulation

        def dataset_fn(input_context):
            ds = pretraining_dataset(
                files, spec.vocab_path, seq_len=seq_len, max_predictions=max_pred,
                batch_size=input_context.get_per_replica_batch_size(micro_global),
                lower_case=spec.lower_case, whole_word_masking=cfg.whole_word_masking,
                seed=cfg.seed * 1000 + phase, input_context=input_context)
            # The input position: batches this pipeline fed before the checkpoint.
            per_step = accumulation * input_context.num_replicas_in_sync // input_context.num_input_pipelines
            return ds.skip(done * per_step) if done else ds

        return iter(self.strategy.distribute_datasets_from_function(dataset_fn))

    def train(self, iterator, steps, accumulation):
        return self.loop.train(iterator, steps, accumulation)

    def forward(self, model):
        return None  # the chief evaluates alone, on its own device
