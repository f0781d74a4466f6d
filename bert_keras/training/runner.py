"""The pre-training runner: one implementation of a run on every backend.

`Run` reads as the run's steps (`Run.run`): resolve the model (options vs the recorded run and
the init checkpoint), record the options, build the state (model, optimiser, the newest
checkpoint that reads), train each phase and evaluate it, export ``final/``.  Everything a
backend does differently is the small object it is handed, ``steps``:

* `bert_keras.training.tensorflow_steps.TensorFlowSteps`: a `tf.distribute` strategy (one
  device, Mirrored, MultiWorkerMirrored, TPU) and Keras' compiled step of `BertPretrainer` on it;
* `bert_keras.training.keras_runner.KerasSteps`: Keras' own compiled step (one ``fit`` a call)
  on a ``keras.distribution.DataParallel`` over every device of every host (JAX), or on one
  device (PyTorch).

``steps`` answers: which process writes (``chief``), how it describes its devices, the scope
the model and optimiser are built in, the optimiser, the phase's batches (positioned after those
already used), how many optimiser steps one call runs and the call itself (the statistics of
`run_files.STATS`, summed), how the held-out forward pass runs, and what its optimiser counts per
step (``accumulation``, for the checkpoint format).

The checkpoints (`keras_checkpoints`, ``checkpoints/step-N/``) are one format on every backend:
a run resumes on another backend.  ``ckpt-N`` checkpoints of the earlier TensorFlow format
resume on TensorFlow; elsewhere they are refused with the command that converts them.
"""

from __future__ import annotations

import json
import logging
import os

import keras
import numpy as np
import tensorflow as tf

from bert_keras.errors import BertKerasError
from bert_keras.progress import Progress  # Keras' bar on a terminal, plain lines in a log
from bert_keras.training import checkpoint_files, keras_checkpoints
from bert_keras.training.evaluation import evaluate_pretrainer
from bert_keras.training.pretrain_config import read_text, check_corpus_files, learning_rate_schedule, phase_files
from bert_keras.training.pretrain_model import build_pretrainer
from bert_keras.training.run_files import NonFiniteLossError, RunFiles, append_metrics, export_final, metrics_record, truncate_metrics
from bert_keras.writing import write_text

logger = logging.getLogger("bert_keras.training")


class Run(RunFiles):
    """The state of one `pretrain` call; each method is a named step of the run."""

    def __init__(self, cfg, steps):
        if not cfg.model_dir:
            raise BertKerasError("model_dir is required")
        if not cfg.train_files and cfg.total_steps:
            raise BertKerasError("train_files is required")
        check_corpus_files(cfg)
        self.cfg, self.steps, self.chief = cfg, steps, steps.chief
        self.model_dir = cfg.model_dir
        join = lambda name: os.path.join(self.model_dir, name)  # noqa: E731
        self.config_path, self.final_dir = join("pretrain_config.json"), join("final")
        self.metrics_path, self.eval_path = join("metrics.jsonl"), join("eval.json")
        self.ckpt_dir = join("checkpoints")
        self.find_checkpoints()
        self.trained, self.last_log, self.evals, self.writer = 0, None, {}, None

    def find_checkpoints(self):
        """The run's checkpoints, from their files (see `checkpoint_files`), oldest first: ``step-N``
        folders and, where ``steps`` reads them, the earlier format's ``ckpt-N``; ``latest``, the newest."""
        found = [(n, 1, os.path.join(self.ckpt_dir, f"step-{n}"))
                 for n in keras_checkpoints.checkpoint_steps(self.ckpt_dir)]
        earlier = checkpoint_files.tf_checkpoints(self.ckpt_dir)
        if earlier and not found and not self.steps.reads_earlier_format:
            raise BertKerasError(
                f"{self.ckpt_dir} holds checkpoints of the earlier TensorFlow format (ckpt-N): convert them with "
                f"`KERAS_BACKEND=tensorflow bert-keras pretrain --config {self.config_path} --convert-checkpoints`, "
                "then rerun this command")
        if self.steps.reads_earlier_format:
            found += [(int(p.rsplit("-", 1)[1]), 0, p) for p in earlier]
        self.checkpoints = [p for _, _, p in sorted(found)]
        self.latest = self.checkpoints[-1] if self.checkpoints else None

    def say(self, line):
        if self.chief:
            print(line, flush=True)

    # ------------------------------------------------------------------ the steps
    def run(self):
        cfg = self.cfg
        self.say(self.steps.describe())
        self.resolve_model()
        if self.chief:
            write_text(self.config_path, json.dumps(cfg.to_dict(), indent=2))
        self.build_state()
        if self.step >= cfg.total_steps:
            return self.finished()
        self.announce_resume()
        for phase in (1, 2):
            if self.step < self.phase_end(phase):
                self.train_phase(phase)
                self.evaluate_phase(phase)
        self.export_final()
        return self.result()

    def build_state(self):
        """Model (from init unless resuming), optimiser, step and phase (from the newest checkpoint that reads)."""
        cfg = self.cfg
        self.schedule = learning_rate_schedule(cfg) if cfg.total_steps else 0.0
        keras.utils.set_random_seed(cfg.seed)  # the same initial weights on every worker and process
        with self.steps.scope():
            self.model = build_pretrainer(cfg, self.vocab_size, spec=self.spec, load_init=not self.latest)
            self.optimizer = self.steps.optimizer(self.schedule)
            self.optimizer.build(self.model.trainable_variables)
        if getattr(self.model, "init_report", None):
            self.say(self.model.init_report)
        self.steps.prepare(self.model, self.optimizer)
        self.step, self.phase = 0, 1
        if self.latest:  # the newest checkpoint that reads; an unreadable one is named and set aside
            self.latest = checkpoint_files.restore_newest(
                self.checkpoints, self.restore, keras_checkpoints.UNREADABLE + self.steps.unreadable, self.files_of,
                self.say, chief=self.chief)
            if self.chief:
                self.find_checkpoints()
                checkpoint_files.rewrite_tf_index(self.ckpt_dir, [p for p in self.checkpoints if _earlier(p)])
        self.steps.restored(self.model, self.optimizer)
        self.last_saved = self.step if self.latest else None
        if tf.io.gfile.exists(self.eval_path):
            self.evals = json.loads(read_text(self.eval_path))

    def finished(self):
        from bert_keras.checkpoints import is_complete_checkpoint

        if self.chief and not is_complete_checkpoint(self.final_dir):
            self.export_final()
        logger.info("pre-training already finished at step %d; final model in %s", self.step, self.final_dir)
        if self.cfg.total_steps:
            self.say(f"pre-training already finished at step {self.step}; final model: {self.final_dir}")
        else:
            self.say(f"0 steps: the final model {self.final_dir} holds the init checkpoint's weights")
        return self.result()

    def announce_resume(self):
        if self.latest:
            logger.info("resuming from %s (step %d)", self.latest, self.step)
            self.say(f"resuming from {self.latest} at step {self.step}")
        if self.chief:
            truncate_metrics(self.metrics_path, self.step)
        self.progbar = Progress(self.cfg.total_steps, stateful_metrics=["loss", "mlm_acc", "nsp_acc", "steps/s"],
                                verbose=1 if (self.chief and self.cfg.progress) else 0)

    def phase_end(self, phase):
        return self.cfg.phase1_steps if phase == 1 else self.cfg.total_steps

    def train_phase(self, phase):
        cfg = self.cfg
        self.phase = phase
        seq_len, max_pred, k = cfg.phase_seq_len(phase), cfg.phase_max_predictions(phase), cfg.phase_accumulation(phase)
        micro = cfg.phase_batch_size(phase) // k
        if micro % self.steps.replicas:
            raise BertKerasError(f"phase {phase}: micro-batch {micro} (batch {cfg.phase_batch_size(phase)} / {k} "
                                 f"accumulation steps) is not divisible by {self.steps.replicas} replicas")
        done = self.step - (0 if phase == 1 else cfg.phase1_steps)
        batches = self.steps.phase_batches(
            phase_files(self.train_files, cfg, phase), self.spec, phase, done)
        self.say(f"phase {phase}: steps {self.step}..{self.phase_end(phase)} at seq_len {seq_len}, {max_pred} "
                 f"predictions, batch {cfg.phase_batch_size(phase)} ({k} x {micro}) on {self.steps.replicas} "
                 "replica(s)")
        end = self.phase_end(phase)
        self.start_window()
        # SIGTERM saves and stops between calls.  Several workers or processes must stop together,
        # which a signal to one of them cannot arrange.
        with checkpoint_files.StopOnSigterm(enabled=self.steps.stops_alone) as stop:
            while self.step < end:
                self.train_call(batches, phase, end)
                if stop.requested:
                    self.stop_on_request()

    def train_call(self, batches, phase, end):
        """One call of the backend's step (up to ``steps_per_call`` optimiser steps), then its log and checkpoint."""
        cfg = self.cfg
        next_log = (self.step // cfg.log_every + 1) * cfg.log_every
        next_ckpt = (self.step // cfg.checkpoint_every + 1) * cfg.checkpoint_every
        n = min(self.steps.steps_per_call, next_log - self.step, next_ckpt - self.step, end - self.step)
        totals = self.steps.train(batches, n)
        if not np.all(np.isfinite(totals[:3])):
            raise NonFiniteLossError(
                f"loss is {totals[0] / n} at step {self.step + n} (phase {phase}); training stopped, "
                + checkpoint_files.kept_checkpoint(self.last_saved, self.ckpt_dir))
        self.account(phase, end, totals, n)

    def stop_on_request(self):
        if self.last_saved != self.step:
            self.save()
        raise checkpoint_files.TrainingStopped.at(self.step, self.latest)

    def log(self, phase, window, steps, elapsed):
        self.last_log = metrics_record(self.cfg, self.schedule, self.step, phase, window, steps, elapsed)
        if not self.chief:
            return
        append_metrics(self.metrics_path, self.last_log)
        if self.writer is None:
            self.writer = tf.summary.create_file_writer(os.path.join(self.model_dir, "tensorboard"))
        with self.writer.as_default(step=self.step):
            for key in ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy",
                        "examples_per_second", "learning_rate", "seq_len"):
                tf.summary.scalar(f"pretrain/{key}", self.last_log[key])
        self.writer.flush()

    # ------------------------------------------------------------------ checkpoints
    def save(self):
        """``step-N`` (`keras_checkpoints`), written by the chief alone: every worker holds the same values."""
        folder = os.path.join(self.ckpt_dir, f"step-{self.step}")
        if self.chief:
            keras_checkpoints.write_step(folder, self.step, self.phase, self.model.variables, self.optimizer.variables,
                                         torch_rng=self.steps.torch_rng, accumulation=self.steps.accumulation,
                                         kept=checkpoint_files.kept_checkpoint(self.last_saved, self.ckpt_dir))
            keras_checkpoints.rotate(self.ckpt_dir, self.cfg.keep_checkpoints)
        self.latest, self.last_saved = folder, self.step

    def files_of(self, checkpoint):
        return checkpoint_files.tf_checkpoint_files(checkpoint) if _earlier(checkpoint) else [checkpoint]

    def restore(self, checkpoint):
        """Reads ``checkpoint`` (a ``step-N`` folder, or a ``ckpt-N`` prefix of the earlier format)."""
        if _earlier(checkpoint):
            self.step, self.phase = checkpoint_files.read_tf_checkpoint(checkpoint, self.model, self.optimizer,
                                                                        self.steps.strategy)
        else:
            self.step, self.phase = keras_checkpoints.read_step(
                checkpoint, self.model.variables, self.optimizer.variables, torch_rng=self.steps.torch_rng,
                accumulation=self.steps.accumulation)

    def convert_checkpoints(self):
        """Writes the newest checkpoint as ``step-N`` (the format every backend resumes); see `pretrain`."""
        self.resolve_model()
        self.build_state()
        if not self.latest:
            raise BertKerasError(f"{self.ckpt_dir}: holds no checkpoint to convert")
        if _earlier(self.latest):
            self.save()
            self.say(f"{self.latest}: written from the earlier format's checkpoint of step {self.step}")
        else:
            self.say(f"{self.latest}: the newest checkpoint is already in the format every backend reads")
        return self.result()

    # ------------------------------------------------------------------ evaluation and export
    def evaluate_phase(self, phase):
        from bert_keras.data import pretraining_dataset

        cfg, spec = self.cfg, self.spec
        if not (cfg.eval_batches and self.eval_files and self.steps.evaluates_here):
            return
        seq_len, max_pred = cfg.phase_seq_len(phase), cfg.phase_max_predictions(phase)
        eval_ds = pretraining_dataset(
            phase_files(self.eval_files, cfg, phase), spec.vocab_path, seq_len=seq_len, max_predictions=max_pred,
            batch_size=cfg.eval_batch_size or max(1, cfg.phase_batch_size(phase) // cfg.phase_accumulation(phase)),
            lower_case=spec.lower_case, whole_word_masking=cfg.whole_word_masking, seed=12345 + phase)
        self.evals[f"phase{phase}"] = dict(
            evaluate_pretrainer(self.model, eval_ds, cfg.eval_batches, mask_id=self.mask_id,
                                forward=self.steps.forward(self.model)),
            step=self.step, seq_len=seq_len, max_predictions=max_pred)
        if self.chief:
            write_text(self.eval_path, json.dumps(self.evals, indent=2))
        self.say(f"held-out phase {phase}: " + ", ".join(
            f"{k} {v:.4f}" for k, v in self.evals[f"phase{phase}"].items() if isinstance(v, float)))

    def export_final(self):
        if self.chief:
            export_final(self.model, self.final_dir, self.spec, metadata={
                "pretrain_steps": self.step, "phase1_steps": self.cfg.phase1_steps,
                "phase2_steps": self.cfg.phase2_steps, "init": self.spec.init})

    def result(self):
        result = {"step": self.step, "final_model": self.final_dir, "trained_steps": self.trained,
                  "strategy": self.steps.name, "replicas": self.steps.replicas, "last_log": self.last_log}
        if self.evals:
            result["eval"] = self.evals
        return result


def _earlier(checkpoint) -> bool:
    """Whether ``checkpoint`` is a ``ckpt-N`` prefix of the earlier TensorFlow format."""
    return not keras_checkpoints.STEP_FOLDER.match(os.path.basename(checkpoint))
