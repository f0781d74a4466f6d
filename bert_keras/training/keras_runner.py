"""What the pre-training runner (`runner.Run`) is handed on JAX and PyTorch: Keras' own training
step, on every device of every host (JAX) or on one device (PyTorch).

* devices (`devices`): ``keras.distribution.DataParallel`` over the devices ``strategy`` names
  (``auto``/``mirrored``: every device of the default platform; ``cpu``/``gpu``: the first
  such device; ``tpu``: every TPU core), on every process of a job of several hosts
  (`devices.join_processes`).  The loss and its gradient are those of the whole global batch
  (one SPMD program), so the global-norm clip is the true global norm.
* several hosts: every process reads the whole global batch (the same stream, so the job
  equals a one-process run) and feeds its share; process 0 writes ``model_dir``.
* one call (up to ``steps_per_call`` optimiser steps): ``compile()`` once per phase, then one
  ``fit`` over the call's micro-batches of the phase's `pretraining_dataset` (read as numpy).  On
  JAX Keras' ``steps_per_execution`` is the call's micro-batch count: the compiled step runs
  them back to back, the variables and logs come back once per call.  PyTorch runs them one by one
  (Keras' ``steps_per_execution`` is 1 there) and eagerly: Keras' ``torch.compile`` took 46 s to
  compile BERT-tiny's step and then ran it 21x slower, so ``jit_compile`` stays off.  With
  ``gradient_accumulation_steps`` k the optimiser applies the mean of the k micro-batch
  gradients, each micro-batch's MLM sum divided by the k's total target count / k
  (`BertPretrainer`'s ``mlm_denominator``).
"""

from __future__ import annotations

import contextlib

import keras
import numpy as np

from bert_keras.errors import BertKerasError
from bert_keras.training import devices
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
        self.steps_per_call = cfg.steps_per_call
        # several hosts (JAX): every process runs the run; process 0 writes model_dir
        self.process, self.processes = devices.join_processes(cfg.strategy)
        self.chief = self.process == 0
        self.devices = devices.select_devices(cfg.strategy, cfg.tpu)
        self.jax = backend == "jax"
        self.torch_rng = not self.jax  # dropout of an unseeded layer draws from torch's global generator
        # every process feeds its own share (`local`): Keras shards nothing itself
        self.distribution = keras.distribution.DataParallel(
            devices=self.devices, auto_shard_dataset=False) if self.jax else None
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
        eager = " (jit_compile: PyTorch's step runs eagerly)" if self.cfg.jit_compile and not self.jax else ""
        return (f"backend: {keras.backend.backend()}, {self.name}, {self.replicas} replica(s) on "
                f"{', '.join(self.devices)}{hosts}{eager}")

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
        # JAX: the call's micro-batches in one execution; PyTorch allows only 1
        calls = self.steps_per_call * self.accumulation if self.jax else 1
        model.compile(optimizer=optimizer, steps_per_execution=calls, jit_compile=self.jax)

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

    def train(self, batches, steps):
        """``steps`` optimiser steps, k micro-batches each, in one ``fit``; their summed statistics."""
        k = self.accumulation
        features, fed, counts = [], [], np.zeros(2)
        for _ in range(steps):
            micro_batches = [next(batches) for _ in range(k)]
            # the loss of one k-times larger batch: every micro-batch's MLM sum over the k's total count
            total = sum(float(np.sum(labels["masked_weights"])) for _, labels in micro_batches) + 1e-5
            for x, labels in micro_batches:
                n = len(labels["next_sentence_label"])
                # every process reads the whole global batch and feeds its share (the job's is the whole)
                features.append(self.local(x))
                fed.append(self.local(labels if k == 1 else
                                      dict(labels, mlm_denominator=np.full(n, total / k, "float32"))))
                counts += [np.sum(labels["masked_weights"]), n]
        history = self.model.fit(**self.fit_data(features, fed), epochs=1, shuffle=False, verbose=0)
        # Keras' logs are the call's means: the losses over its micro-batches, the accuracies over
        # its targets and sequences
        logs = {key: float(values[-1]) for key, values in history.history.items()}
        return np.array([logs["loss"] * steps, logs["mlm_loss"] * steps, logs["nsp_loss"] * steps,
                         logs["mlm_accuracy"] * counts[0], counts[0], logs["nsp_accuracy"] * counts[1], counts[1]])

    def fit_data(self, features, labels):
        """``fit``'s data arguments for the call's micro-batches, in order."""
        if self.jax:
            return {"x": _joined(features), "y": _joined(labels), "batch_size": len(labels[0]["next_sentence_label"])}
        torch = devices.backend_module("torch")
        # a loader with its own generator: Keras' would draw its seed from torch's global
        # generator, which dropout draws from, so the call's length would change the masks
        return {"x": torch.utils.data.DataLoader(list(zip(features, labels)), batch_size=None,
                                                 generator=torch.Generator())}

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


def _joined(batches):
    """Micro-batches (dicts of arrays) as one dict of arrays, in order."""
    return {key: np.concatenate([batch[key] for batch in batches]) for key in batches[0]}
