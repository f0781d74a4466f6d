"""What a pre-training run (`bert_keras.training.runner.Run`) keeps in its model_dir:
``metrics.jsonl`` (one line per log window, a torn last line dropped on resume), ``final/``,
and the step that resolves the model, vocabulary and data files from the options.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import keras
import numpy as np
import tensorflow as tf

from bert_keras.errors import BertKerasError
from bert_keras.text.vocab import load_vocab, token_ids
from bert_keras.training.pretrain_config import file_list, read_text, check_resume_options, split_heldout
from bert_keras.writing import write_text

# The statistics a backend's training call returns, in this order: the loss terms summed over
# optimiser steps, the MLM and NSP correct predictions and counts summed over micro-batches.
STATS = ("loss", "mlm_loss", "nsp_loss", "mlm_correct", "mlm_count", "nsp_correct", "nsp_count")


class NonFiniteLossError(BertKerasError):
    """The training loss became NaN or infinite; the last good checkpoint is kept."""


def read_metrics(path):
    """The logged lines of ``metrics.jsonl`` as dicts.  A torn last line (the process died
    mid-write) is dropped; any other unreadable line is an error naming it."""
    if not tf.io.gfile.exists(path):
        return [], False
    lines = read_text(path).split("\n")
    records, torn = [], False
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict):
            records.append(record)
            continue
        if any(rest.strip() for rest in lines[number:]):
            raise BertKerasError(f"{path}: line {number}: not a JSON object: {line[:60]!r}")
        torn = True
    return records, torn


def truncate_metrics(path, step):
    """Drops lines logged after ``step`` by a run that died before its next checkpoint,
    and a torn last line."""
    records, torn = read_metrics(path)
    keep = [r for r in records if r.get("step", 0) <= step]
    if torn:
        print(f"{path}: dropped a torn last line (the previous run stopped while writing it)")
    if torn or len(keep) != len(records):
        write_text(path, "".join(json.dumps(r) + "\n" for r in keep))


def append_metrics(path, record):
    """One ``write`` of a whole line, flushed and synced: a crash can tear only the last line,
    which `read_metrics` drops on resume."""
    line = json.dumps(record) + "\n"
    if "://" in path:
        with tf.io.gfile.GFile(path, "a") as f:
            f.write(line)
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def export_final(model, final_dir, spec, metadata):
    """``final/`` as a whole (`save_checkpoint`): a temporary sibling renamed into place, or on
    ``gs://`` copied up with its completion marker ``bert_keras.json`` last; it replaces only a
    previous bert-keras save."""
    from bert_keras.checkpoints import save_checkpoint

    save_checkpoint(model, final_dir, vocab_path=spec.vocab_path, lower_case=spec.lower_case, metadata=metadata)


def metrics_record(cfg, schedule, step, phase, window, steps, elapsed) -> dict:
    """One line of ``metrics.jsonl``: the window's sums of the loss terms over ``steps`` optimiser
    steps and of the MLM/NSP counts (`STATS` order), its rate over ``elapsed`` seconds,
    and the learning rate of the last step."""
    lr = float(keras.ops.convert_to_numpy(schedule(step - 1)))
    return {
        "step": step, "phase": phase, "seq_len": cfg.phase_seq_len(phase),
        "loss": window[0] / steps, "mlm_loss": window[1] / steps, "nsp_loss": window[2] / steps,
        "mlm_accuracy": window[3] / max(window[4], 1), "nsp_accuracy": window[5] / max(window[6], 1),
        "examples_per_second": window[6] / max(elapsed, 1e-9),
        "steps_per_second": steps / max(elapsed, 1e-9),
        "learning_rate": lr, "batch_size": cfg.phase_batch_size(phase), "wall_time": time.time(),
    }


class RunFiles:
    """The runner's bookkeeping (`runner.Run` derives from it): the log window, what follows each
    call of the step, and the model's resolution; it uses the run's ``cfg``, ``latest``,
    ``model_dir``, ``config_path``, ``say``, ``log`` and ``save``."""

    def start_window(self):
        """A fresh log window: the statistics (`STATS`) summed since the last metrics line."""
        self.window, self.window_steps, self.window_start = np.zeros(len(STATS)), 0, time.perf_counter()

    def account(self, phase, end, totals, steps):
        """After ``steps`` optimiser steps whose statistics sum to ``totals``: the progress, the
        metrics line every ``log_every`` steps and the checkpoint every ``checkpoint_every`` (and at
        the phase's ``end``)."""
        cfg = self.cfg
        self.step += steps
        self.trained += steps
        self.window += totals
        self.window_steps += steps
        elapsed = time.perf_counter() - self.window_start
        self.progbar.update(self.step, values=[
            ("loss", totals[0] / steps), ("mlm_acc", totals[3] / max(totals[4], 1)),
            ("nsp_acc", totals[5] / max(totals[6], 1)), ("steps/s", self.window_steps / max(elapsed, 1e-9))])
        if self.step % cfg.log_every == 0 or self.step == end:
            self.log(phase, self.window, self.window_steps, elapsed)
            self.start_window()
        if self.step % cfg.checkpoint_every == 0 or self.step == end:
            self.save()

    def resolve_model(self):
        """Options vs the recorded run (on resume) and vs the init checkpoint -> `ModelSpec`."""
        from bert_keras.training.pretrain_model import resolve_model

        cfg = self.cfg
        model_cfg = cfg
        if self.latest:
            check_resume_options(self.config_path, cfg)
            recorded = json.loads(read_text(self.config_path)) if tf.io.gfile.exists(self.config_path) else {}
            # The run's own checkpoint takes precedence; its init only fixes the architecture.
            model_cfg = dataclasses.replace(cfg, init=recorded.get("init", cfg.init))
            if cfg.init:
                self.say(f"{self.model_dir} holds a run (checkpoint {os.path.basename(self.latest)}): resuming it; "
                         f"init {cfg.init} is not loaded")
        self.spec = resolve_model(model_cfg)
        for note in self.spec.notes:
            self.say(note)
        vocab = load_vocab(self.spec.vocab_path)
        self.vocab_size = len(vocab)
        self.mask_id = token_ids(vocab).get("[MASK]")
        self.train_files = file_list(cfg.train_files)
        self.eval_files = file_list(cfg.eval_files)
        if cfg.heldout_every and self.train_files:
            train_path, held_path = split_heldout(self.train_files, os.path.join(self.model_dir, "data"),
                                                  cfg.heldout_every)
            self.train_files, self.eval_files = [train_path], self.eval_files or [held_path]
