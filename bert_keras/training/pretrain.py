"""Two-phase MLM + NSP pre-training on every Keras backend and every scale, resumable.

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

One runner (`runner.Run`) runs on every backend; what a backend does differently is the object
it is handed: on TensorFlow `tensorflow_steps.TensorFlowSteps` (a `tf.distribute` strategy: one
device, Mirrored, MultiWorkerMirrored, TPU; `BertPretrainer`'s Keras-compiled step, ``steps_per_call``
steps a call), on JAX and PyTorch `keras_runner.KerasSteps` (Keras' compiled step, one ``fit`` a call, on a
``keras.distribution.DataParallel`` over every device of every host; PyTorch: one device).
The pieces live in `pretrain_config`, `pretrain_model`, `evaluation` and
`keras_checkpoints`; their public names are importable from here.

Checkpoints (``model_dir/checkpoints/step-N/``, `keras_checkpoints`: one format on every
backend, written whole, the last ``keep_checkpoints`` kept) hold the model, the optimiser, the
step and the phase; the input position follows from them, because the data stream of a phase is
a deterministic function of (seed, phase) and a resumed run skips the batches already used.  A
run checkpointed here resumes on JAX or PyTorch and the other way round; ``ckpt-N`` checkpoints
of the earlier TensorFlow format (tf.train.Checkpoint) still resume here, and
``convert_checkpoints`` writes the newest as ``step-N``.  Rerunning the same command resumes;
a finished run returns at once.  At the end the whole pre-training model (encoder + MLM/NSP
heads) is written with `bert_keras.save_checkpoint` to ``model_dir/final`` (with ``vocab.txt``),
which ``bk.load_checkpoint(path)`` reads as an encoder.

Logs: progress (Keras' bar on a terminal, plain lines in a log), TensorBoard scalars in
``model_dir/tensorboard`` and ``model_dir/metrics.jsonl`` (one JSON object per
logged step: step, phase, seq_len, loss, mlm_loss, nsp_loss, mlm_accuracy,
nsp_accuracy, examples_per_second, steps_per_second, learning_rate).

The Keras ``fit`` path, from Python, without this runner: docs/pretraining.md.
"""

from __future__ import annotations

import contextlib

import keras
import tensorflow as tf

from bert_keras.errors import BertKerasError
from bert_keras.training import checkpoint_files
from bert_keras.training.evaluation import evaluate_pretrainer
from bert_keras.layers.cross_entropy import sparse_softmax_cross_entropy
from bert_keras.models.pretrainer import pretraining_terms
from bert_keras.training.pretrain_config import (MIXED_PRECISION, SCHEDULES, PhasedSchedule, PretrainConfig,
                                                 learning_rate_schedule, resolve_path, split_heldout)
from bert_keras.training.pretrain_model import build_pretrainer
from bert_keras.training.run_files import NonFiniteLossError, read_metrics
from bert_keras.training.runner import Run  # noqa: F401 - the runner itself, for tests and tools
from bert_keras.locks import single_writer

__all__ = ["PretrainConfig", "pretrain", "evaluate_pretrainer", "pretraining_terms",
           "sparse_softmax_cross_entropy", "learning_rate_schedule", "PhasedSchedule", "NonFiniteLossError",
           "build_pretrainer", "resolve_path", "split_heldout", "MIXED_PRECISION", "SCHEDULES", "read_metrics"]


def pretrain(cfg: PretrainConfig, strategy: tf.distribute.Strategy | None = None,
             convert_checkpoints: bool = False) -> dict:
    """Runs (or resumes, or recognises as finished) the two-phase pre-training of ``cfg``.

    Args:
      cfg: the run's `PretrainConfig`.
      strategy: (TensorFlow) a ready strategy; default ``resolve_strategy(cfg.strategy, cfg.tpu)``.
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
    cfg.validate()
    backend = keras.backend.backend()
    if backend == "tensorflow":
        from bert_keras.training.tensorflow_steps import TensorFlowSteps

        steps = TensorFlowSteps(cfg, strategy)
    elif backend in ("jax", "torch"):  # Keras' own training step (JAX: on keras.distribution.DataParallel)
        from bert_keras.training.keras_runner import KerasSteps

        if strategy is not None:
            raise BertKerasError(f"a tf.distribute strategy was passed and Keras runs on {backend} in this process: "
                                 "there the runner takes its devices from cfg.strategy")
        if convert_checkpoints:
            raise BertKerasError("checkpoints of the earlier TensorFlow format (ckpt-N) are converted on TensorFlow: "
                                 "run the command with KERAS_BACKEND=tensorflow")
        steps = KerasSteps(cfg)
    else:
        raise BertKerasError(
            f"the pre-training runner runs on TensorFlow, JAX or PyTorch and Keras runs on {backend} in this "
            "process: run `bert-keras pretrain` (TensorFlow unless KERAS_BACKEND=jax), or train "
            "BertPretrainer with compile() + fit() on this backend")
    run = Run(cfg, steps)
    # the chief writes model_dir; a second run into it is refused while this one lives
    with single_writer(run.model_dir) if run.chief else contextlib.nullcontext():
        tf.io.gfile.makedirs(run.model_dir)
        run.find_checkpoints()  # again, under the lock
        if run.chief:
            checkpoint_files.remove_temporaries(run.ckpt_dir, run.say)
        with steps.active():
            return run.convert_checkpoints() if convert_checkpoints else run.run()
