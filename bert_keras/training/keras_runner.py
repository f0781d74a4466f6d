"""What the pre-training runner (`runner.Run`) is handed on JAX and PyTorch: Keras' own training
step, on every device of every host (JAX) or on one device (PyTorch).

* devices (`devices`): ``keras.distribution.DataParallel`` over the devices ``strategy`` names
  (``auto``/``mirrored``: every device of the default platform; ``cpu``/``gpu``: the first
  such device; ``tpu``: every TPU core), on every process of a job of several hosts
  (`devices.join_processes`).  The loss and its gradient are those of the whole global batch
  (one SPMD program), so the global-norm clip is the true global norm.
* several hosts: every process reads the whole global batch (the same stream, so the job
  equals a one-process run) and feeds its share; process 0 writes ``model_dir``.
* one optimiser step: ``compile()`` once, then ``train_on_batch`` on each micro-batch of the
  phase's `pretraining_dataset` (read as numpy); with ``gradient_accumulation_steps`` k the
  optimiser applies the mean of the k micro-batch gradients, each micro-batch's MLM sum
  divided by the k's total target count / k (`BertPretrainer`'s ``mlm_denominator``).
"""

from __future__ import annotations

import contextlib

import keras
import numpy as np

from bert_keras.errors import BertKerasError
from bert_keras.training import devices
# the window statistics, summed over optimiser steps (loss terms) or micro-batches (counts)
from bert_keras.training.run_files import STATS
from bert_keras.training.optimization import create_optimizer


class MicroStepSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """``schedule(step // k)``: a Keras optimiser with ``gradient_accumulation_steps`` k calls its
    schedule with the count of micro-batches; this gives it the optimiser step."""

    def __init__(self, schedule, steps):
        self.schedule, self.steps = schedule, int(steps)

    def __call__(self, step):
        return self.schedule(keras.ops.floor_divide(step, self.steps))

    def get_config(self):
        return {"schedule": keras.saving.serialize_keras_object(self.schedule), "steps": self.steps}


class KerasSteps:
    """The JAX and PyTorch side of a run (see the module docstring and `runner.Run`)."""

    reads_earlier_format = False
    unreadable = ()
    steps_per_call = 1
    strategy = None

    def __init__(self, cfg):
        backend = keras.backend.backend()
        if backend not in ("jax", "torch"):
            raise BertKerasError(f"Keras' own training step runs the pre-training on JAX or PyTorch here, and Keras "
                                 f"runs on {backend} in this process")
        used = [p for p in (1, 2) if (cfg.phase1_steps if p == 1 else cfg.phase2_steps)]
        accumulations = {cfg.phase_accumulation(p) for p in used}
        if len(accumulations) > 1:
            raise BertKerasError(
                f"gradient_accumulation_steps {cfg.gradient_accumulation_steps} and "
                f"phase2_gradient_accumulation_steps {cfg.phase2_gradient_accumulation_steps} differ: on {backend} one "
                "optimiser accumulates for both phases (use one value, or KERAS_BACKEND=tensorflow)")
        self.cfg = cfg
        self.accumulation = accumulations.pop() if accumulations else 1
        # several hosts (JAX): every process runs the run; process 0 writes model_dir
        self.process, self.processes = devices.join_processes(cfg.strategy)
        self.chief = self.process == 0
        self.devices = devices.select_devices(cfg.strategy, cfg.tpu)
        self.jax = backend == "jax"
        self.torch_rng = not self.jax  # dropout of an unseeded layer draws from torch's global generator
        self.distribution = keras.distribution.DataParallel(devices=self.devices) if self.jax else None
        self.replicas = len(self.devices)
        self.name = "DataParallel" if self.jax else "one device"
        self.stops_alone = self.processes == 1  # one process of several cannot stop alone
        self.evaluates_here = True  # every process takes its share of the held-out batches
        for p in used:
            micro = cfg.phase_batch_size(p) // self.accumulation
            if micro % self.replicas:
                raise BertKerasError(f"phase {p}: micro-batch {micro} (batch {cfg.phase_batch_size(p)} / "
                                     f"{self.accumulation} accumulation steps) is not divisible by "
                                     f"{self.replicas} devices")
        if cfg.eval_batches and cfg.eval_batch_size and cfg.eval_batch_size % self.replicas:
            raise BertKerasError(f"eval_batch_size {cfg.eval_batch_size} is not divisible by {self.replicas} devices")

    @contextlib.contextmanager
    def active(self):
        """The run's ``keras.distribution`` (JAX), set while it runs."""
        if self.distribution is None:
            yield
            return
        previous = keras.distribution.distribution()
        try:
            keras.distribution.set_distribution(self.distribution)
            yield
        finally:
            keras.distribution.set_distribution(previous)

    def describe(self):
        hosts = f" ({self.processes} processes)" if self.processes > 1 else ""
        return (f"backend: {keras.backend.backend()}, {self.name}, {self.replicas} replica(s) on "
                f"{', '.join(self.devices)}{hosts}")

    def scope(self):
        return contextlib.nullcontext()

    def optimizer(self, schedule):
        cfg, k = self.cfg, self.accumulation
        rate = MicroStepSchedule(schedule, k) if (k > 1 and cfg.total_steps) else schedule
        return create_optimizer(
            cfg.optimizer, rate, weight_decay=cfg.weight_decay, clipnorm=cfg.clipnorm, beta_1=cfg.beta_1,
            beta_2=cfg.beta_2, epsilon=cfg.epsilon, loss_scale=cfg.mixed_precision == "fp16",
            adam_rule=cfg.adam_rule, gradient_accumulation_steps=k if k > 1 else None)

    def prepare(self, model, optimizer):
        self.model = model
        model.compile(optimizer=optimizer)

    def restored(self, model, optimizer):
        if self.jax:
            devices.commit_to_devices(model.variables + optimizer.variables + model.metrics_variables)

    def phase_batches(self, files, spec, phase, done):
        """The phase's micro-batches as numpy, positioned after the ``done`` optimiser steps."""
        from bert_keras.data import pretraining_dataset

        cfg, k = self.cfg, self.accumulation
        ds = pretraining_dataset(files, spec.vocab_path, seq_len=cfg.phase_seq_len(phase),
                                 max_predictions=cfg.phase_max_predictions(phase),
                                 batch_size=cfg.phase_batch_size(phase) // k, lower_case=spec.lower_case,
                                 whole_word_masking=cfg.whole_word_masking, seed=cfg.seed * 1000 + phase)
        return (ds.skip(done * k) if done else ds).as_numpy_iterator()

    def train(self, batches, steps, accumulation):
        """One optimiser step (``steps`` is 1): k micro-batches through ``train_on_batch``."""
        k = self.accumulation
        stats = np.zeros(len(STATS))
        micro_batches = [next(batches) for _ in range(k)]
        # the loss of one k-times larger batch: every micro-batch's MLM sum over the k's total count
        total = sum(float(np.sum(labels["masked_weights"])) for _, labels in micro_batches) + 1e-5
        for features, labels in micro_batches:
            fed = labels if k == 1 else dict(
                labels, mlm_denominator=np.full(len(labels["next_sentence_label"]), total / k, "float32"))
            # every process reads the whole global batch and feeds its share (the job's is the whole)
            logs = self.model.train_on_batch(self.local(features), self.local(fed), return_dict=True)
            mlm_count = float(np.sum(labels["masked_weights"]))
            nsp_count = float(len(labels["next_sentence_label"]))
            stats += [logs["loss"] / k, logs["mlm_loss"] / k, logs["nsp_loss"] / k,
                      logs["mlm_accuracy"] * mlm_count, mlm_count, logs["nsp_accuracy"] * nsp_count, nsp_count]
        return stats

    def local(self, batch):
        """This process's share of a global batch (all of it with one process)."""
        if self.processes == 1:
            return batch
        n = len(next(iter(batch.values())))
        part = slice(self.process * n // self.processes, (self.process + 1) * n // self.processes)
        return {key: value[part] for key, value in batch.items()}

    def forward(self, model):
        """With several processes: the model on this process's share of a batch, its outputs gathered
        from every process (None: the whole batch here)."""
        if self.processes == 1:
            return None

        def forward(features):
            out = model.predict_on_batch(self.local(features))
            return {k: devices.gather_from_processes(v) for k, v in out.items()}
        return forward
