"""A pre-training run's checkpoints: ``model_dir/checkpoints/step-<N>/``, one format on every backend.

A folder holds ``model.npz`` (every model variable, dropout seed states included),
``optimizer.npz`` (every optimiser variable: moments, the step counter, a loss scale) and
``state.json`` (step, phase, the variables' paths, the backend that wrote it), on PyTorch also
``torch_rng.npz`` (torch's global generator, which dropout draws from there).  The data position
follows from the step: a phase's stream is a deterministic function of (seed, phase).

One format for every backend: variables are stored in the order the model and optimiser list
them, which is the same on TensorFlow, JAX and PyTorch, and the optimiser's state is stored as
of an optimiser step.  A Keras optimiser that accumulates k micro-batches counts micro-batches
and keeps gradient accumulators; those are empty between optimiser steps and are not stored, and
its counter is stored divided by k.  So a run checkpointed on one backend resumes on another,
and with the other runner's gradient accumulation.

A local folder is written whole (`atomic_folder`); elsewhere (``gs://``, through TensorFlow's file
system) its files are written first and ``state.json`` last, and only a folder with
``state.json`` counts as a checkpoint.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import zipfile
import zlib

import keras
import numpy as np

from bert_keras.errors import BertKerasError
from bert_keras.training.devices import backend_module
from bert_keras.writing import atomic_folder, write_text

STEP_FOLDER = re.compile(r"^step-(\d+)$")
# what reading a torn, truncated or bit-flipped checkpoint raises
UNREADABLE = (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, zlib.error)
ACCUMULATOR = "_gradient_accumulator"


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


def _listdir(folder):
    if "://" in folder:
        gfile = _gfile()
        return [n.rstrip("/") for n in gfile.listdir(folder)] if gfile.isdir(folder) else []
    return os.listdir(folder) if os.path.isdir(folder) else []


def _exists(path):
    return _gfile().exists(path) if "://" in path else os.path.exists(path)


def _read_bytes(path):
    if "://" in path:
        with _gfile().GFile(path, "rb") as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def checkpoint_steps(ckpt_dir):
    """The steps of the complete checkpoints in ``ckpt_dir``, oldest first."""
    steps = [int(m.group(1)) for m in map(STEP_FOLDER.match, _listdir(ckpt_dir))
             if m and _exists(os.path.join(ckpt_dir, m.group(0), "state.json"))]
    return sorted(steps)


def step_folders(ckpt_dir):
    """The complete checkpoint folders of ``ckpt_dir``, oldest first."""
    return [os.path.join(ckpt_dir, f"step-{n}") for n in checkpoint_steps(ckpt_dir)]


def _torch_rng_states():
    torch = backend_module("torch")

    states = {"cpu": torch.get_rng_state().numpy()}
    if torch.cuda.is_available():
        states.update({f"cuda{i}": s.numpy() for i, s in enumerate(torch.cuda.get_rng_state_all())})
    return states


def _set_torch_rng_states(states):
    torch = backend_module("torch")

    torch.set_rng_state(torch.from_numpy(states["cpu"]))
    cuda = [torch.from_numpy(states[k]) for k in sorted(k for k in states if k.startswith("cuda"))]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)


def _stored(optimizer_variables):
    return [v for v in optimizer_variables if not v.path.endswith(ACCUMULATOR)]


def _is_counter(v):
    """An optimiser's step counter (``iteration``), which counts micro-batches when it accumulates."""
    return v.path.rsplit("/", 1)[-1] == "iteration"


def _arrays(variables, accumulation=1):
    values = {}
    for i, v in enumerate(variables):
        value = keras.ops.convert_to_numpy(v.value)
        values[f"v{i:05d}"] = value // accumulation if _is_counter(v) else value
    return values


def write_step(folder, step, phase, model_variables, optimizer_variables, torch_rng=False, accumulation=1,
               kept=None):
    """Writes one checkpoint folder (see the module docstring).

    Args:
      accumulation: how many micro-batches the optimiser counts per optimiser step (a Keras
        optimiser with ``gradient_accumulation_steps``).
      kept: what a full disk leaves, in words, for the `DiskFullError` line.
    Raises:
      DiskFullError: the disk filled; nothing of the folder is left.
    """
    stored = _stored(optimizer_variables)
    arrays = {"model.npz": _arrays(model_variables), "optimizer.npz": _arrays(stored, accumulation)}
    if torch_rng:  # dropout of an unseeded layer draws from torch's global generator
        arrays["torch_rng.npz"] = _torch_rng_states()
    state = json.dumps({
        "step": step, "phase": phase, "backend": keras.backend.backend(),
        "model_variables": [v.path for v in model_variables],
        "optimizer_variables": [v.path for v in stored]}, indent=1)
    needs = sum(a.nbytes for values in arrays.values() for a in values.values())
    # state.json last on a remote file system: the folder counts once it is there
    with atomic_folder(folder, may_replace=lambda _: None, needs_bytes=needs, kept=kept, last="state.json") as tmp:
        for name, values in arrays.items():
            np.savez(os.path.join(tmp, name), **values)
        write_text(os.path.join(tmp, "state.json"), state)


def _npz(path):
    """An npz file opened for reading (a remote one read into memory first)."""
    return np.load(io.BytesIO(_read_bytes(path)) if "://" in path else path, allow_pickle=False)


def _load(path):
    with _npz(path) as stored:
        return [stored[f"v{i:05d}"] for i in range(len(stored.files))]


def read_step(folder, model_variables, optimizer_variables, torch_rng=False, accumulation=1):
    """Restores one checkpoint folder into the variables; returns ``(step, phase)``.

    Every file is read first (a torn one raises before any variable changes), then assigned;
    gradient accumulators are set to zero and the step counter to ``accumulation`` times the
    stored one.
    """
    state = json.loads(_read_bytes(os.path.join(folder, "state.json")).decode("utf-8"))
    step, phase = int(state["step"]), int(state["phase"])
    stored = _stored(optimizer_variables)
    pairs = []
    for name, key, variables in (("model.npz", "model_variables", model_variables),
                                 ("optimizer.npz", "optimizer_variables", stored)):
        # Paths carry per-process names (bert_pretrainer_1/...): the order and shapes must match.
        values = _load(os.path.join(folder, name))
        if [a.shape for a in values] != [tuple(v.shape) for v in variables]:
            raise BertKerasError(f"{folder}: its {len(values)} {key.replace('_', ' ')} do not match this "
                                 f"run's {len(variables)}; use a new model_dir")
        pairs += [(v, value * accumulation if _is_counter(v) else value)
                  for v, value in zip(variables, values)]
    rng = None
    if torch_rng and _exists(os.path.join(folder, "torch_rng.npz")):
        with _npz(os.path.join(folder, "torch_rng.npz")) as states:
            rng = dict(states)
    for v, value in pairs:
        v.assign(value.astype(keras.backend.standardize_dtype(v.dtype)))
    for v in optimizer_variables:
        if v.path.endswith(ACCUMULATOR):
            v.assign(keras.ops.zeros(v.shape, v.dtype))
    if rng is not None:
        _set_torch_rng_states(rng)
    return step, phase


def rotate(ckpt_dir, keep):
    """Keeps the checkpoints of the newest ``keep`` steps of ``ckpt_dir`` (of this format and of the
    earlier TensorFlow one, ``ckpt-N``, which a resumed run leaves), deleting the others."""
    from bert_keras.training.checkpoint_files import tf_checkpoint_files, tf_checkpoints

    found = {n: [os.path.join(ckpt_dir, f"step-{n}")] for n in checkpoint_steps(ckpt_dir)}
    for prefix in tf_checkpoints(ckpt_dir):
        found.setdefault(int(prefix.rsplit("-", 1)[1]), []).extend(tf_checkpoint_files(prefix))
    for step in sorted(found)[:-keep]:
        paths = found[step]
        for path in paths:
            if "://" in path:
                gfile = _gfile()
                gfile.rmtree(path) if gfile.isdir(path) else gfile.remove(path)
            elif os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
