"""The two-phase pre-training runner on Keras' own training step: JAX (every device of every host)
and PyTorch (one device).

`bert_keras.training.pretrain.pretrain` hands a run to this module when Keras runs on JAX or
PyTorch.  It does what the tf.distribute runner does (the phases, the same data stream per
(seed, phase), resume after a kill, checkpoints every ``checkpoint_every`` steps and at phase
ends, ``metrics.jsonl``, gradient accumulation as one k-times larger batch, ``init`` from a
checkpoint, held-out evaluation after each phase, ``final/`` written with `save_checkpoint`),
with Keras' backend-neutral pieces:

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
* checkpoints (`keras_checkpoints`): ``model_dir/checkpoints/step-<N>/`` written whole, one
  format on every backend (a run resumes on another backend); the last ``keep_checkpoints``
  are kept.

The data stream of a phase is a deterministic function of (seed, phase): a resumed run
skips the micro-batches already used and continues as the uninterrupted run would.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os

import keras
import numpy as np

from bert_keras.errors import BertKerasError
from bert_keras.progress import Progress  # Keras' bar on a terminal, plain lines in a log
from bert_keras.training import checkpoint_files, devices, keras_checkpoints
from bert_keras.training.evaluation import evaluate_pretrainer
from bert_keras.training.keras_checkpoints import checkpoint_steps, holds_tensorflow_checkpoints  # noqa: F401
# the window statistics, summed over optimiser steps (loss terms) or micro-batches (counts)
from bert_keras.training.loop import _STATS, NonFiniteLossError
from bert_keras.training.optimization import create_optimizer
from bert_keras.training.pretrain_config import (_read_text, check_corpus_files, learning_rate_schedule,
                                                 phase_files)
from bert_keras.training.pretrain_model import build_pretrainer
from bert_keras.training.run_files import RunFiles, append_metrics, export_final, metrics_record, truncate_metrics
from bert_keras.locks import single_writer
from bert_keras.writing import write_text

logger = logging.getLogger("bert_keras.training")


class MicroStepSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """``schedule(step // k)``: a Keras optimiser with ``gradient_accumulation_steps`` k calls its
    schedule with the count of micro-batches; this gives it the optimiser step."""

    def __init__(self, schedule, steps):
        self.schedule, self.steps = schedule, int(steps)

    def __call__(self, step):
        return self.schedule(keras.ops.floor_divide(step, self.steps))

    def get_config(self):
        return {"schedule": keras.saving.serialize_keras_object(self.schedule), "steps": self.steps}


def pretrain_keras(cfg) -> dict:
    """`pretrain` on the JAX or PyTorch backend (see the module docstring); same arguments and result."""
    backend = keras.backend.backend()
    if backend not in ("jax", "torch"):
        raise BertKerasError(f"the Keras pre-training runner runs on JAX or PyTorch, and Keras runs on {backend} "
                             "in this process: use bert_keras.training.pretrain.pretrain")
    run = _KerasRun(cfg)
    # process 0 writes model_dir; a second run into it is refused while this one lives
    with single_writer(run.model_dir) if run.chief else contextlib.nullcontext():
        os.makedirs(run.model_dir, exist_ok=True)
        run.find_checkpoint()  # read again under the lock
        if run.chief:
            checkpoint_files.remove_temporaries(run.ckpt_dir, run.say)
        if run.distribution is None:
            return run.run()
        previous = keras.distribution.distribution()
        try:
            keras.distribution.set_distribution(run.distribution)
            return run.run()
        finally:
            keras.distribution.set_distribution(previous)


class _KerasRun(RunFiles):
    """The state of one run; each method is a named step, as in the tf.distribute runner."""

    def __init__(self, cfg):
        cfg.validate()
        if not cfg.model_dir:
            raise BertKerasError("model_dir is required")
        if "://" in cfg.model_dir:
            raise BertKerasError(f"model_dir {cfg.model_dir}: on JAX the runner writes a local folder "
                                 "(a URL model_dir needs KERAS_BACKEND=tensorflow)")
        if not cfg.train_files and cfg.total_steps:
            raise BertKerasError("train_files is required")
        check_corpus_files(cfg)
        used = [p for p in (1, 2) if (cfg.phase1_steps if p == 1 else cfg.phase2_steps)]
        accumulations = {cfg.phase_accumulation(p) for p in used}
        if len(accumulations) > 1:
            raise BertKerasError(
                f"gradient_accumulation_steps {cfg.gradient_accumulation_steps} and "
                f"phase2_gradient_accumulation_steps {cfg.phase2_gradient_accumulation_steps} differ: on JAX one "
                "optimiser accumulates for both phases (use one value, or KERAS_BACKEND=tensorflow)")
        self.accumulation = accumulations.pop() if accumulations else 1
        self.cfg = cfg
        # several hosts (JAX): every process runs this; process 0 writes model_dir
        self.process, self.processes = devices.join_processes(cfg.strategy)
        self.chief = self.process == 0
        self.devices = devices.select_devices(cfg.strategy, cfg.tpu)
        self.jax = keras.backend.backend() == "jax"
        self.distribution = keras.distribution.DataParallel(devices=self.devices) if self.jax else None
        for p in used:
            micro = cfg.phase_batch_size(p) // self.accumulation
            if micro % len(self.devices):
                raise BertKerasError(f"phase {p}: micro-batch {micro} (batch {cfg.phase_batch_size(p)} / "
                                     f"{self.accumulation} accumulation steps) is not divisible by "
                                     f"{len(self.devices)} devices")
        if cfg.eval_batches and cfg.eval_batch_size and cfg.eval_batch_size % len(self.devices):
            raise BertKerasError(f"eval_batch_size {cfg.eval_batch_size} is not divisible by {len(self.devices)} devices")
        self.model_dir = cfg.model_dir
        join = lambda name: os.path.join(self.model_dir, name)  # noqa: E731
        self.config_path, self.final_dir = join("pretrain_config.json"), join("final")
        self.metrics_path, self.eval_path = join("metrics.jsonl"), join("eval.json")
        self.ckpt_dir = join("checkpoints")
        self.trained, self.last_log, self.evals = 0, None, {}
        self.latest = None

    def say(self, line):
        if self.chief:
            print(line, flush=True)

    def describe_devices(self):
        kind = "DataParallel" if self.jax else "one device"
        hosts = f" ({self.processes} processes)" if self.processes > 1 else ""
        return (f"backend: {keras.backend.backend()}, {kind}, {len(self.devices)} replica(s) on "
                f"{', '.join(self.devices)}{hosts}")

    def find_checkpoint(self):
        self.checkpoints = keras_checkpoints.step_folders(self.ckpt_dir)
        if not self.checkpoints and holds_tensorflow_checkpoints(self.ckpt_dir):
            config = os.path.join(self.model_dir, "pretrain_config.json")
            raise BertKerasError(
                f"{self.ckpt_dir} holds checkpoints of the earlier TensorFlow format (ckpt-N): convert them "
                f"with `KERAS_BACKEND=tensorflow bert-keras pretrain --config {config} --convert-checkpoints`, "
                "then rerun this command")
        self.latest = self.checkpoints[-1] if self.checkpoints else None

    # ------------------------------------------------------------------ the steps
    def run(self):
        cfg = self.cfg
        self.say(self.describe_devices())
        self.resolve_model()
        if self.chief:
            write_text(self.config_path, json.dumps(cfg.to_dict(), indent=2))
        self.build_state()
        if self.step >= cfg.total_steps:
            return self.finished()
        if self.latest:
            logger.info("resuming from %s (step %d)", self.latest, self.step)
            self.say(f"resuming from {self.latest} at step {self.step}")
        if self.chief:
            truncate_metrics(self.metrics_path, self.step)
        self.progbar = Progress(cfg.total_steps, stateful_metrics=["loss", "mlm_acc", "nsp_acc", "steps/s"],
                                verbose=1 if cfg.progress and self.chief else 0)
        self.writer = None
        for phase in (1, 2):
            if self.step < self.phase_end(phase):
                self.train_phase(phase)
                self.evaluate_phase(phase)
        self.export_final()
        return self.result()

    def build_state(self):
        cfg = self.cfg
        self.schedule = learning_rate_schedule(cfg) if cfg.total_steps else 0.0
        keras.utils.set_random_seed(cfg.seed)  # the same initial weights as an uninterrupted run
        self.model = build_pretrainer(cfg, self.vocab_size, spec=self.spec, load_init=not self.latest)
        if getattr(self.model, "init_report", None):
            self.say(self.model.init_report)
        k = self.accumulation
        rate = MicroStepSchedule(self.schedule, k) if (k > 1 and cfg.total_steps) else self.schedule
        self.optimizer = create_optimizer(
            cfg.optimizer, rate, weight_decay=cfg.weight_decay, clipnorm=cfg.clipnorm, beta_1=cfg.beta_1,
            beta_2=cfg.beta_2, epsilon=cfg.epsilon, loss_scale=cfg.mixed_precision == "fp16",
            adam_rule=cfg.adam_rule, gradient_accumulation_steps=k if k > 1 else None)
        self.optimizer.build(self.model.trainable_variables)
        self.model.compile(optimizer=self.optimizer)
        self.step, self.phase = 0, 1
        if self.latest:  # the newest checkpoint that reads; an unreadable one is named and set aside
            self.latest = checkpoint_files.restore_newest(
                self.checkpoints, self.restore, keras_checkpoints.UNREADABLE, lambda folder: [folder], self.say,
                chief=self.chief)
        if self.jax:
            devices.commit_to_devices(self.model.variables + self.optimizer.variables + self.model.metrics_variables)
        self.last_saved = self.step if self.latest else None
        if os.path.exists(self.eval_path):
            self.evals = json.loads(_read_text(self.eval_path))

    def finished(self):
        from bert_keras.checkpoints import is_complete_checkpoint

        if not is_complete_checkpoint(self.final_dir):
            self.export_final()
        if self.cfg.total_steps:
            self.say(f"pre-training already finished at step {self.step}; final model: {self.final_dir}")
        else:
            self.say(f"0 steps: the final model {self.final_dir} holds the init checkpoint's weights")
        return self.result()

    def phase_end(self, phase):
        return self.cfg.phase1_steps if phase == 1 else self.cfg.total_steps

    def phase_batches(self, phase):
        """The phase's micro-batches as numpy, positioned after those already used."""
        from bert_keras.data import pretraining_dataset

        cfg, spec, k = self.cfg, self.spec, self.accumulation
        seq_len, max_pred = cfg.phase_seq_len(phase), cfg.phase_max_predictions(phase)
        micro = cfg.phase_batch_size(phase) // k
        ds = pretraining_dataset(phase_files(self.train_files, cfg, phase), spec.vocab_path, seq_len=seq_len,
                                 max_predictions=max_pred,
                                 batch_size=micro, lower_case=spec.lower_case,
                                 whole_word_masking=cfg.whole_word_masking, seed=cfg.seed * 1000 + phase)
        done = self.step - (0 if phase == 1 else cfg.phase1_steps)
        if done:
            ds = ds.skip(done * k)
        self.say(f"phase {phase}: steps {self.step}..{self.phase_end(phase)} at seq_len {seq_len}, {max_pred} "
                 f"predictions, batch {cfg.phase_batch_size(phase)} ({k} x {micro}) on {len(self.devices)} "
                 "replica(s)")
        return ds.as_numpy_iterator()

    def train_phase(self, phase):
        self.phase = phase
        batches = self.phase_batches(phase)
        end = self.phase_end(phase)
        self.start_window()
        # SIGTERM: save, then stop, between steps (one process of several cannot stop alone)
        with checkpoint_files.StopOnSigterm(enabled=self.processes == 1) as stop:
            while self.step < end:
                self.train_step(batches, phase, end)
                if stop.requested:
                    if self.last_saved != self.step:
                        self.save()
                    raise checkpoint_files.TrainingStopped.at(self.step, self.latest)

    def train_step(self, batches, phase, end):
        """One optimiser step (k micro-batches), then its log and checkpoint."""
        k = self.accumulation
        stats = np.zeros(len(_STATS))
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
        if not np.all(np.isfinite(stats[:3])):
            raise NonFiniteLossError(f"loss is {stats[0]} at step {self.step + 1} (phase {phase}); training "
                                     "stopped, " + checkpoint_files.kept_checkpoint(self.last_saved, self.ckpt_dir))
        self.account(phase, end, stats, 1)

    def local(self, batch):
        """This process's share of a global batch (all of it with one process)."""
        if self.processes == 1:
            return batch
        n = len(next(iter(batch.values())))
        part = slice(self.process * n // self.processes, (self.process + 1) * n // self.processes)
        return {key: value[part] for key, value in batch.items()}

    def log(self, phase, window, steps, elapsed):
        self.last_log = metrics_record(self.cfg, self.schedule, self.step, phase, window, steps, elapsed)
        if self.chief:
            append_metrics(self.metrics_path, self.last_log)
            self.tensorboard(self.last_log)

    def tensorboard(self, record):
        import tensorflow as tf

        if self.writer is None:
            self.writer = tf.summary.create_file_writer(os.path.join(self.model_dir, "tensorboard"))
        with self.writer.as_default(step=self.step):
            for key in ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy",
                        "examples_per_second", "learning_rate", "seq_len"):
                tf.summary.scalar(f"pretrain/{key}", record[key])
        self.writer.flush()

    # ------------------------------------------------------------------ checkpoints
    def save(self):
        folder = os.path.join(self.ckpt_dir, f"step-{self.step}")
        if self.chief:
            keras_checkpoints.write_step(folder, self.step, self.phase, self.model.variables, self.optimizer.variables,
                                         torch_rng=not self.jax, accumulation=self.accumulation,
                                         kept=checkpoint_files.kept_checkpoint(self.last_saved, self.ckpt_dir))
            keras_checkpoints.rotate(self.ckpt_dir, self.cfg.keep_checkpoints)
        self.last_saved, self.latest = self.step, folder

    def restore(self, folder):
        self.step, self.phase = keras_checkpoints.read_step(
            folder, self.model.variables, self.optimizer.variables, torch_rng=not self.jax,
            accumulation=self.accumulation)

    # ------------------------------------------------------------------ evaluation and export
    def evaluate_phase(self, phase):
        from bert_keras.data import pretraining_dataset

        cfg, spec = self.cfg, self.spec
        if not (cfg.eval_batches and self.eval_files):
            return
        seq_len, max_pred = cfg.phase_seq_len(phase), cfg.phase_max_predictions(phase)
        eval_ds = pretraining_dataset(
            phase_files(self.eval_files, cfg, phase), spec.vocab_path, seq_len=seq_len, max_predictions=max_pred,
            batch_size=cfg.eval_batch_size or max(1, cfg.phase_batch_size(phase) // self.accumulation),
            lower_case=spec.lower_case, whole_word_masking=cfg.whole_word_masking, seed=12345 + phase)
        self.evals[f"phase{phase}"] = dict(
            evaluate_pretrainer(self.model, eval_ds, cfg.eval_batches, mask_id=self.mask_id,
                                forward=self.global_forward() if self.processes > 1 else None),
            step=self.step, seq_len=seq_len, max_predictions=max_pred)
        if self.chief:
            write_text(self.eval_path, json.dumps(self.evals, indent=2))
        self.say(f"held-out phase {phase}: " + ", ".join(
            f"{k} {v:.4f}" for k, v in self.evals[f"phase{phase}"].items() if isinstance(v, float)))

    def global_forward(self):
        """The model on this process's share of a batch, its outputs gathered from every process."""
        def forward(features):
            out = self.model.predict_on_batch(self.local(features))
            return {k: devices.gather_from_processes(v) for k, v in out.items()}
        return forward

    def export_final(self):
        if not self.chief:
            return
        export_final(self.model, self.final_dir, self.spec, metadata={
            "pretrain_steps": self.step, "phase1_steps": self.cfg.phase1_steps,
            "phase2_steps": self.cfg.phase2_steps, "init": self.spec.init})

    def result(self):
        result = {"step": self.step, "final_model": self.final_dir, "trained_steps": self.trained,
                  "strategy": "DataParallel" if self.jax else "one device", "replicas": len(self.devices), "last_log": self.last_log}
        if self.evals:
            result["eval"] = self.evals
        return result
