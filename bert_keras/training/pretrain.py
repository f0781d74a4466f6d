"""Two-phase MLM + NSP pre-training on any `tf.distribute` strategy, or on JAX, resumable.

On the JAX Keras backend `pretrain` hands the run to `bert_keras.training.keras_runner`
(Keras' own training step on ``keras.distribution.DataParallel`` over the local devices,
Keras-native checkpoints), and on PyTorch too (one device); the rest of this docstring
describes the TensorFlow runner.

The paper's recipe (Devlin et al., 2019, appendix A.2): 90% of the steps at
sequence length 128 with 20 masked-LM predictions, the last 10% at 512 with
80, the same 512-row position table throughout, phase 2 continuing from
phase 1's weights and optimiser state.

    from bert_keras.training.pretrain import PretrainConfig, pretrain
    cfg = PretrainConfig.from_file("training/pretrain_mini_wiki.yaml",
                                   overrides={"model_dir": "runs/mini_wiki", "phase1_steps": 100})
    result = pretrain(cfg)               # resumes if runs/mini_wiki holds checkpoints
    result["final_model"]                # folder for bk.load_checkpoint / finetune

    # continued pre-training of a released checkpoint (sizes, vocabulary, casing from it)
    pretrain(PretrainConfig(init="sample:minilm", train_files="corpus.txt", model_dir="runs/dapt"))

The runner reads as its steps (`pretrain` below): resolve the model (options vs
the recorded run and the init checkpoint), record the options, build the state
(model, optimiser, checkpoint), train each phase and evaluate it, export
``final/``.  The pieces live in `pretrain_config`, `pretrain_model`, `loop` and
`evaluation`; their public names are importable from here.

The runner is a custom distributed loop: `strategy.distribute_datasets_from_function`
feeds each replica its own shard (files split by input pipeline) and a
`tf.function` runs ``steps_per_call`` optimiser steps per call, each doing
``strategy.run`` of one replica step.  Why not `model.fit`: Keras 3's `fit`
fails under MultiWorkerMirroredStrategy (``Attempt to convert a value
(PerReplica...) to a Tensor``) and has open TPUStrategy reports
(keras-team/keras#19448); the loop below works under the default, Mirrored,
MultiWorkerMirrored and TPU strategies alike.

One optimiser step (gradient accumulation, the global-norm clip, fp16 loss scaling) is
`loop.PretrainLoop`'s.

Checkpoints (``model_dir/checkpoints/step-N/``, `keras_checkpoints`: one format on every
backend, written whole, the last ``keep_checkpoints`` kept) hold the model, the optimiser, the
step and the phase; the input position follows from them, because the data stream of a phase is
a deterministic function of (seed, phase) and a resumed run skips the batches already used.  A
run checkpointed here resumes on JAX or PyTorch and the other way round; ``ckpt-N`` checkpoints
of the earlier TensorFlow format (tf.train.Checkpoint) still resume here, and
``convert_checkpoints`` writes the newest as ``step-N``.
Rerunning the same command resumes; a finished run returns at
once.  At the end the whole pre-training model (encoder + MLM/NSP heads) is
written with `bert_keras.save_checkpoint` to ``model_dir/final`` (with
``vocab.txt``), which ``bk.load_checkpoint(path)`` reads as an encoder.

Logs: progress (Keras' bar on a terminal, plain lines in a log), TensorBoard scalars in
``model_dir/tensorboard`` and ``model_dir/metrics.jsonl`` (one JSON object per
logged step: step, phase, seq_len, loss, mlm_loss, nsp_loss, mlm_accuracy,
nsp_accuracy, examples_per_second, steps_per_second, learning_rate).

The Keras ``fit`` path, from Python, without this runner: docs/pretraining.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os

import keras
import numpy as np
import tensorflow as tf

from bert_keras.errors import BertKerasError
from bert_keras.progress import Progress  # Keras' bar on a terminal, plain lines in a log
from bert_keras.training import checkpoint_files, distribute, keras_checkpoints
from bert_keras.training.evaluation import evaluate_pretrainer
from bert_keras.training.loop import (NonFiniteLossError, PretrainLoop, pretraining_terms,
                                      sparse_softmax_cross_entropy)
from bert_keras.training.optimization import create_optimizer
from bert_keras.training.pretrain_config import (MIXED_PRECISION, SCHEDULES, PhasedSchedule, PretrainConfig,
                                                 _read_text, check_corpus_files, learning_rate_schedule, phase_files,
                                                 resolve_path, split_heldout)
from bert_keras.training.pretrain_model import build_pretrainer
from bert_keras.training.run_files import (RunFiles, append_metrics, export_final, metrics_record, read_metrics,
                                           truncate_metrics)
from bert_keras.locks import single_writer
from bert_keras.writing import write_text

__all__ = ["PretrainConfig", "pretrain", "PretrainLoop", "evaluate_pretrainer", "pretraining_terms",
           "sparse_softmax_cross_entropy", "learning_rate_schedule", "PhasedSchedule", "NonFiniteLossError",
           "build_pretrainer", "resolve_path", "split_heldout", "MIXED_PRECISION", "SCHEDULES", "read_metrics"]

logger = logging.getLogger("bert_keras.training")


# =========================================================================== the runner
def pretrain(cfg: PretrainConfig, strategy: tf.distribute.Strategy | None = None,
             convert_checkpoints: bool = False) -> dict:
    """Runs (or resumes, or recognises as finished) the two-phase pre-training of ``cfg``.

    Args:
      cfg: the run's `PretrainConfig`.
      strategy: a ready strategy; default ``resolve_strategy(cfg.strategy, cfg.tpu)``.
      convert_checkpoints: (TensorFlow) only write the newest checkpoint of the earlier
        TensorFlow format (``ckpt-N``) as ``step-N``, which every backend resumes, and return.
    Returns:
      dict with ``step`` (optimiser steps done), ``final_model`` (folder),
      ``trained_steps`` (steps run by this call), ``eval`` (held-out results
      per phase, when evaluated) and ``last_log`` (the last metrics line).
    Raises:
      BertKerasError: bad configuration or data, or options changed on resume;
        `NonFiniteLossError` when the loss stops being finite.
    """
    import keras

    from bert_keras.training import keras_runner

    backend = keras.backend.backend()
    if backend in ("jax", "torch"):  # Keras' own training step (JAX: on keras.distribution.DataParallel)
        if strategy is not None:
            raise BertKerasError(f"a tf.distribute strategy was passed and Keras runs on {backend} in this process: "
                                 "there the runner takes its devices from cfg.strategy")
        if convert_checkpoints:
            raise BertKerasError("checkpoints of the earlier TensorFlow format (ckpt-N) are converted on TensorFlow: "
                                 "run the command with KERAS_BACKEND=tensorflow")
        return keras_runner.pretrain_keras(cfg)
    if backend != "tensorflow":
        raise BertKerasError(
            f"the pre-training runner runs on TensorFlow, JAX or PyTorch and Keras runs on {backend} in this "
            "process: run `bert-keras pretrain` (TensorFlow unless KERAS_BACKEND=jax), or train "
            "BertPretrainer with compile() + fit() on this backend")
    run = _Run(cfg, strategy)
    # the chief writes model_dir; a second run into it is refused while this one lives
    with single_writer(run.model_dir) if run.chief else contextlib.nullcontext():
        tf.io.gfile.makedirs(run.model_dir)
        run.find_checkpoints()  # again, under the lock
        if run.chief:
            checkpoint_files.remove_temporaries(run.ckpt_dir, run.say)
        return run.convert_checkpoints() if convert_checkpoints else _pretrain(run)


def _pretrain(run):
    cfg = run.cfg
    run.say(run.describe_devices())
    run.resolve_model()
    run.record_options()
    run.build_state()
    if run.step >= cfg.total_steps:
        return run.finished()
    run.announce_resume()
    for phase in (1, 2):
        if run.step < run.phase_end(phase):
            run.train_phase(phase)
            run.evaluate_phase(phase)
    run.export_final()
    return run.result()


class _Run(RunFiles):
    """The state of one `pretrain` call; each method is a named step of the runner."""

    def __init__(self, cfg, strategy):
        cfg.validate()
        if not cfg.model_dir:
            raise BertKerasError("model_dir is required")
        if not cfg.train_files and cfg.total_steps:
            raise BertKerasError("train_files is required")
        check_corpus_files(cfg)
        self.cfg = cfg
        self.strategy = strategy or distribute.resolve_strategy(cfg.strategy, cfg.tpu)
        self.chief = distribute.is_chief(self.strategy)
        self.model_dir = cfg.model_dir
        join = lambda name: os.path.join(self.model_dir, name)  # noqa: E731
        self.config_path, self.final_dir = join("pretrain_config.json"), join("final")
        self.metrics_path, self.eval_path = join("metrics.jsonl"), join("eval.json")
        self.ckpt_dir = join("checkpoints")
        self.find_checkpoints()
        self.trained, self.last_log, self.evals = 0, None, {}

    def find_checkpoints(self):
        """The run's checkpoints, from their files (see `checkpoint_files`), oldest first: ``step-N``
        folders and the earlier format's ``ckpt-N`` prefixes; ``latest``, the newest."""
        found = [(int(p.rsplit("-", 1)[1]), 1, p) for p in keras_checkpoints.step_folders(self.ckpt_dir)]
        found += [(int(p.rsplit("-", 1)[1]), 0, p) for p in checkpoint_files.tf_checkpoints(self.ckpt_dir)]
        self.checkpoints = [p for _, _, p in sorted(found)]
        self.latest = self.checkpoints[-1] if self.checkpoints else None

    def say(self, line):
        if self.chief:
            print(line)

    def describe_devices(self):
        """The run's first line: which backend and devices train."""
        try:
            devices = ", ".join(self.strategy.extended.worker_devices)
        except RuntimeError:  # the default strategy: this process's default device
            devices = "the CPU" if not tf.config.list_logical_devices("GPU") else "the first GPU"
        name = "default strategy" if self.strategy is tf.distribute.get_strategy() else type(self.strategy).__name__
        return f"backend: tensorflow, {name}, {self.strategy.num_replicas_in_sync} replica(s) on {devices}"

    # ------------------------------------------------------------------ steps
    def record_options(self):
        if self.chief:
            write_text(self.config_path, json.dumps(self.cfg.to_dict(), indent=2))

    def build_state(self):
        """Model (from init unless resuming), optimiser, step and phase (from the newest checkpoint that reads)."""
        cfg, strategy = self.cfg, self.strategy
        self.schedule = learning_rate_schedule(cfg) if cfg.total_steps else 0.0
        keras.utils.set_random_seed(cfg.seed)  # the same initial weights on every worker
        with strategy.scope():
            self.model = build_pretrainer(cfg, self.vocab_size, spec=self.spec, load_init=not self.latest)
            self.optimizer = create_optimizer(
                cfg.optimizer, self.schedule, weight_decay=cfg.weight_decay, clipnorm=None, beta_1=cfg.beta_1,
                beta_2=cfg.beta_2, epsilon=cfg.epsilon, loss_scale=cfg.mixed_precision == "fp16",
                adam_rule=cfg.adam_rule)
            self.optimizer.build(self.model.trainable_variables)
        if getattr(self.model, "init_report", None):
            self.say(self.model.init_report)
        self.step, self.phase = 0, 1
        if self.latest:  # the newest checkpoint that reads; an unreadable one is named and set aside
            self.latest = checkpoint_files.restore_newest(
                self.checkpoints, self.restore, keras_checkpoints.UNREADABLE + (tf.errors.OpError, IndexError),
                self.files_of, self.say, chief=self.chief)
            if self.chief:
                self.find_checkpoints()
                checkpoint_files.rewrite_tf_index(self.ckpt_dir, self.old_format())
        self.last_saved = self.step if self.latest else None
        if tf.io.gfile.exists(self.eval_path):
            self.evals = json.loads(_read_text(self.eval_path))

    def old_format(self):
        return [p for p in self.checkpoints if not keras_checkpoints.STEP_FOLDER.match(os.path.basename(p))]

    def files_of(self, checkpoint):
        if keras_checkpoints.STEP_FOLDER.match(os.path.basename(checkpoint)):
            return [checkpoint]
        return checkpoint_files.tf_checkpoint_files(checkpoint)

    def restore(self, checkpoint):
        """Reads ``checkpoint`` (a ``step-N`` folder, or a ``ckpt-N`` prefix of the earlier format)."""
        if keras_checkpoints.STEP_FOLDER.match(os.path.basename(checkpoint)):
            self.step, self.phase = keras_checkpoints.read_step(checkpoint, self.model.variables,
                                                                self.optimizer.variables)
            return
        self.step, self.phase = checkpoint_files.read_tf_checkpoint(checkpoint, self.model, self.optimizer,
                                                                    self.strategy)

    def convert_checkpoints(self):
        """Writes the newest checkpoint as ``step-N`` (the format every backend resumes); see `pretrain`."""
        self.resolve_model()
        self.build_state()
        if not self.latest:
            raise BertKerasError(f"{self.ckpt_dir}: holds no checkpoint to convert")
        if not keras_checkpoints.STEP_FOLDER.match(os.path.basename(self.latest)):
            self.save()
            self.say(f"{self.latest}: written from the earlier format's checkpoint of step {self.step}")
        else:
            self.say(f"{self.latest}: the newest checkpoint is already in the format every backend reads")
        return self.result()

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
        self.loop = PretrainLoop(self.model, self.optimizer, self.strategy, clipnorm=self.cfg.clipnorm,
                                 jit_compile=self.cfg.jit_compile)
        self.writer = tf.summary.create_file_writer(os.path.join(self.model_dir, "tensorboard")) if self.chief else None
        self.progbar = Progress(self.cfg.total_steps, stateful_metrics=["loss", "mlm_acc", "nsp_acc", "steps/s"],
                                verbose=1 if (self.chief and self.cfg.progress) else 0)

    def phase_end(self, phase):
        return self.cfg.phase1_steps if phase == 1 else self.cfg.total_steps

    def phase_dataset(self, phase):
        """The distributed iterator of ``phase``, positioned after the batches already used."""
        from bert_keras.data import pretraining_dataset

        cfg, strategy = self.cfg, self.strategy
        seq_len, max_pred = cfg.phase_seq_len(phase), cfg.phase_max_predictions(phase)
        accumulation = cfg.phase_accumulation(phase)
        micro_global = cfg.phase_batch_size(phase) // accumulation
        if micro_global % strategy.num_replicas_in_sync:
            raise BertKerasError(f"phase {phase}: micro-batch {micro_global} is not divisible by "
                                 f"{strategy.num_replicas_in_sync} replicas")
        done = self.step - (0 if phase == 1 else cfg.phase1_steps)
        spec, train_files = self.spec, phase_files(self.train_files, cfg, phase)

        def dataset_fn(input_context):
            ds = pretraining_dataset(
                train_files, spec.vocab_path, seq_len=seq_len, max_predictions=max_pred,
                batch_size=input_context.get_per_replica_batch_size(micro_global),
                lower_case=spec.lower_case, whole_word_masking=cfg.whole_word_masking,
                seed=cfg.seed * 1000 + phase, input_context=input_context)
            # The input position: batches this pipeline fed before the checkpoint.
            per_step = accumulation * input_context.num_replicas_in_sync // input_context.num_input_pipelines
            return ds.skip(done * per_step) if done else ds

        self.say(f"phase {phase}: steps {self.step}..{self.phase_end(phase)} at seq_len {seq_len}, {max_pred} "
                 f"predictions, batch {cfg.phase_batch_size(phase)} ({accumulation} x {micro_global}) on "
                 f"{strategy.num_replicas_in_sync} replica(s)")
        return iter(strategy.distribute_datasets_from_function(dataset_fn))

    def train_phase(self, phase):
        self.phase = phase
        iterator = self.phase_dataset(phase)
        end = self.phase_end(phase)
        self.start_window()
        # SIGTERM saves and stops between calls.  Several workers must save together, which a signal
        # to one of them cannot arrange (tf.distribute's PreemptionCheckpointHandler does that).
        multiworker = isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)
        with checkpoint_files.StopOnSigterm(enabled=not multiworker) as stop:
            while self.step < end:
                self.train_call(iterator, phase, end)
                if stop.requested:
                    self.stop_on_request()

    def train_call(self, iterator, phase, end):
        """One call of the compiled loop (up to ``steps_per_call`` steps), then its log and checkpoint."""
        cfg = self.cfg
        next_log = (self.step // cfg.log_every + 1) * cfg.log_every
        next_ckpt = (self.step // cfg.checkpoint_every + 1) * cfg.checkpoint_every
        n = min(cfg.steps_per_call, next_log - self.step, next_ckpt - self.step, end - self.step)
        totals = self.loop.train(iterator, n, cfg.phase_accumulation(phase))
        if not np.all(np.isfinite(totals[:3])):
            raise NonFiniteLossError(
                f"loss is {totals[0] / n} at step {self.step + n} (phase {phase}); training stopped, "
                + checkpoint_files.kept_checkpoint(self.last_saved, self.ckpt_dir))
        self.account(phase, end, totals, n)

    def save(self):
        """``step-N`` (`keras_checkpoints`), written by the chief alone: every worker holds the same values."""
        folder = os.path.join(self.ckpt_dir, f"step-{self.step}")
        if self.chief:
            keras_checkpoints.write_step(folder, self.step, self.phase, self.model.variables, self.optimizer.variables,
                                         kept=checkpoint_files.kept_checkpoint(self.last_saved, self.ckpt_dir))
            keras_checkpoints.rotate(self.ckpt_dir, self.cfg.keep_checkpoints)
        self.latest, self.last_saved = folder, self.step

    def stop_on_request(self):
        if self.last_saved != self.step:
            self.save()
        raise checkpoint_files.TrainingStopped.at(self.step, self.latest)

    def log(self, phase, window, steps, elapsed):
        self.last_log = metrics_record(self.cfg, self.schedule, self.step, phase, window, steps, elapsed)
        if not self.chief:
            return
        append_metrics(self.metrics_path, self.last_log)
        with self.writer.as_default(step=self.step):
            for key in ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy",
                        "examples_per_second", "learning_rate", "seq_len"):
                tf.summary.scalar(f"pretrain/{key}", self.last_log[key])
        self.writer.flush()

    def evaluate_phase(self, phase):
        from bert_keras.data import pretraining_dataset

        cfg, spec = self.cfg, self.spec
        if not (cfg.eval_batches and self.eval_files and self.chief):
            return
        seq_len, max_pred = cfg.phase_seq_len(phase), cfg.phase_max_predictions(phase)
        eval_ds = pretraining_dataset(
            phase_files(self.eval_files, cfg, phase), spec.vocab_path, seq_len=seq_len, max_predictions=max_pred,
            batch_size=cfg.eval_batch_size or max(1, cfg.phase_batch_size(phase) // cfg.phase_accumulation(phase)),
            lower_case=spec.lower_case, whole_word_masking=cfg.whole_word_masking, seed=12345 + phase)
        self.evals[f"phase{phase}"] = dict(
            evaluate_pretrainer(self.model, eval_ds, cfg.eval_batches, mask_id=self.mask_id),
            step=self.step, seq_len=seq_len, max_predictions=max_pred)
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
                  "strategy": type(self.strategy).__name__, "replicas": self.strategy.num_replicas_in_sync,
                  "last_log": self.last_log}
        if self.evals:
            result["eval"] = self.evals
        return result
