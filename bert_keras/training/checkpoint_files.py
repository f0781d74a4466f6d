"""A pre-training run's checkpoints on disk, for both runners: which are there, which one a
resume reads, what is left after a crash, and a stop on SIGTERM.

* Which are there: the files themselves (``step-N/state.json``, and ``ckpt-N.index`` of the
  earlier TensorFlow format), not TensorFlow's ``checkpoint`` index file:
  that file, when garbled, makes `tf.train.latest_checkpoint` answer None, and a run would
  start over on top of its own checkpoints.
* Which one resumes (`restore_newest`): the newest that reads.  One that does not (a torn
  or bit-flipped file) is named in one line, moved to ``checkpoints/unreadable/`` (kept, not
  deleted) and the one before it is read; when none reads, the run is refused with the
  command that starts it over.
* Temporaries: a checkpoint is written into a temporary folder renamed into place
  (``.step-N.tmp-*``; TensorFlow's earlier format: ``ckpt-N_temp/``); a kill leaves it
  behind, and it would grow on every resume.  `remove_temporaries` deletes them on start.
* `StopOnSigterm`: schedulers and preemptible machines stop a job with SIGTERM; the runner
  checks `requested` between steps, saves a checkpoint and raises `TrainingStopped`
  (exit status 143 from the CLI, with the line that says how to resume).
"""

from __future__ import annotations

import os
import re
import signal
import threading

import tensorflow as tf

from bert_keras.errors import BertKerasError

TF_CHECKPOINT = re.compile(r"^ckpt-(\d+)\.index$")
# what a save that did not finish leaves: TensorFlow's ckpt-N_temp, `atomic_folder`'s .step-N.tmp-*
TEMPORARY = re.compile(r"^(ckpt-\d+_temp|\.step-\d+\.tmp-)")
UNREADABLE = "unreadable"


class TrainingStopped(BertKerasError):
    """Training was asked to stop (SIGTERM) and saved a checkpoint first; rerun to resume."""

    exit_code = 143  # 128 + SIGTERM, what a scheduler expects of a job it stopped

    @classmethod
    def at(cls, step, checkpoint):
        return cls(f"stopped by SIGTERM at step {step}: checkpoint {checkpoint} saved; rerun the same command "
                   "to resume from it")


def tf_checkpoints(ckpt_dir) -> list[str]:
    """The tf.distribute runner's checkpoint prefixes in ``ckpt_dir`` (``.../ckpt-N``), oldest first."""
    if not tf.io.gfile.isdir(ckpt_dir):
        return []
    found = [(int(m.group(1)), m.group(0)[:-len(".index")]) for m in map(TF_CHECKPOINT.match,
                                                                      tf.io.gfile.listdir(ckpt_dir)) if m]
    return [os.path.join(ckpt_dir, name) for _, name in sorted(found)]


def remove_temporaries(ckpt_dir, say=print) -> None:
    """Deletes the temporaries left by a save that did not finish (a kill)."""
    if not tf.io.gfile.isdir(ckpt_dir):
        return
    for name in tf.io.gfile.listdir(ckpt_dir):
        if TEMPORARY.match(name.rstrip("/")):
            path = os.path.join(ckpt_dir, name.rstrip("/"))
            if tf.io.gfile.isdir(path):
                tf.io.gfile.rmtree(path)
            else:
                tf.io.gfile.remove(path)
            say(f"{path}: removed (a checkpoint save that did not finish)")


def tf_checkpoint_files(prefix) -> list[str]:
    """The files of one tf.distribute checkpoint: ``ckpt-N.index`` and its ``.data-*`` shards."""
    folder, name = os.path.split(prefix)
    return [os.path.join(folder, n) for n in tf.io.gfile.listdir(folder)
            if n == name + ".index" or n.startswith(name + ".data-")]


def read_tf_checkpoint(prefix, model, optimizer, strategy):
    """Restores a checkpoint of the earlier TensorFlow format (a tf.train.Checkpoint of the model,
    the optimiser, the step, the phase and dropout's seed states); returns ``(step, phase)``."""
    with strategy.scope():
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        phase = tf.Variable(1, dtype=tf.int64, trainable=False, name="phase",
                            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    seed_states = [v for v in model.variables if "seed_generator" in v.path]
    tf.train.Checkpoint(model=model, optimizer=optimizer, step=step, phase=phase,
                        seed_states=seed_states).restore(prefix).assert_existing_objects_matched()
    return int(step.numpy()), int(phase.numpy())


def _first_line(error) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__


def restore_newest(candidates, restore, unreadable_errors, files_of, say, chief=True):
    """Restores the newest of ``candidates`` (oldest first) that ``restore(candidate)`` reads.

    A candidate whose restore raises one of ``unreadable_errors`` is named in one line and, once
    an older one has been read, moved (``files_of(candidate)``) into ``unreadable/`` beside it.
    Returns the candidate read, or None when there are none.
    Raises:
      BertKerasError: no candidate reads (nothing is moved then).
    """
    failed = []
    for candidate in reversed(candidates):
        try:
            restore(candidate)
        except unreadable_errors as e:
            failed.append((candidate, _first_line(e)))
            continue
        for path, why in failed:
            say(f"{path}: unreadable ({why}); resuming from the checkpoint before it, {candidate}")
            if chief:
                _set_aside(files_of(path), say)
        return candidate
    if failed:
        path, why = failed[0]
        folder = os.path.dirname(path)
        raise BertKerasError(
            f"{path}: unreadable ({why}), and no checkpoint before it reads either ({len(failed)} tried): to "
            f"start this run over, move {folder} away (mv {folder} {folder}.unreadable)")
    return None


def _set_aside(paths, say):
    for path in paths:
        folder, name = os.path.split(path.rstrip("/"))
        aside = os.path.join(folder, UNREADABLE)
        tf.io.gfile.makedirs(aside)
        target, n = os.path.join(aside, name), 1
        while tf.io.gfile.exists(target):  # one set aside before, under the same name
            target, n = os.path.join(aside, f"{name}.{n}"), n + 1
        tf.io.gfile.rename(path, target)
    if paths:
        say(f"{os.path.join(os.path.dirname(paths[0].rstrip('/')), UNREADABLE)}: holds the unreadable checkpoint "
            "(delete it once it is not needed)")


def rewrite_tf_index(ckpt_dir, prefixes) -> None:
    """TensorFlow's ``checkpoint`` index file, naming ``prefixes`` (oldest first) and the newest as latest,
    so that `tf.train.CheckpointManager` counts and rotates the checkpoints that are there."""
    from tensorflow.python.checkpoint import checkpoint_management

    names = [os.path.basename(p) for p in prefixes]
    if names:
        checkpoint_management.update_checkpoint_state_internal(
            ckpt_dir, model_checkpoint_path=names[-1], all_model_checkpoint_paths=names, save_relative_paths=True)


def kept_checkpoint(step, ckpt_dir) -> str:
    """What a failure keeps, in words: the checkpoint of ``step``, or none (``step`` None)."""
    if step is None:
        return f"no checkpoint was written yet in {ckpt_dir}"
    return f"the last good checkpoint (step {step}) in {ckpt_dir} is kept"


class StopOnSigterm:
    """``with StopOnSigterm() as stop: ... if stop.requested: save and stop``.

    The first SIGTERM only sets ``requested``; a second one stops the process as SIGTERM does.
    Outside the main thread (where Python cannot set handlers), or not ``enabled``, it does nothing.
    """

    def __init__(self, enabled=True):
        self.enabled, self.requested = enabled, False
        self._previous = None

    def _handle(self, signum, frame):
        if self.requested:  # asked twice: stop now
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
        self.requested = True

    def __enter__(self):
        if self.enabled and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
        return False
