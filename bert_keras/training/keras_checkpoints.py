"""The Keras runner's checkpoints: ``model_dir/checkpoints/step-<N>/``, one format on JAX and PyTorch.

A folder is written whole (`atomic_folder`): ``model.npz`` (every model variable, dropout seed
states included), ``optimizer.npz`` (every optimiser variable: moments, iteration counter,
accumulators) and ``state.json`` (step, phase, the variables' paths), on PyTorch also
``torch_rng.npz`` (torch's global generator, which dropout draws from there).  Variables are
stored in the order the model and optimiser list them, which is the same on every Keras backend:
a run checkpointed on JAX resumes on PyTorch and the other way round.
"""

from __future__ import annotations

import json
import os
import re

import keras
import numpy as np

from bert_keras.errors import BertKerasError
from bert_keras.training.devices import backend_module
from bert_keras.training.pretrain_config import _read_text
from bert_keras.writing import atomic_folder, write_text

STEP_FOLDER = re.compile(r"^step-(\d+)$")


def checkpoint_steps(ckpt_dir):
    """The steps of the complete checkpoints in ``ckpt_dir``, oldest first."""
    if not os.path.isdir(ckpt_dir):
        return []
    steps = [int(m.group(1)) for m in map(STEP_FOLDER.match, os.listdir(ckpt_dir))
             if m and os.path.isfile(os.path.join(ckpt_dir, m.group(0), "state.json"))]
    return sorted(steps)


def holds_tensorflow_checkpoints(ckpt_dir):
    return os.path.isdir(ckpt_dir) and any(n == "checkpoint" or n.startswith("ckpt-") for n in os.listdir(ckpt_dir))


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


def write_step(folder, step, phase, model_variables, optimizer_variables, torch_rng=False):
    """Writes one checkpoint folder whole (see the module docstring)."""
    with atomic_folder(folder, may_replace=lambda _: None) as tmp:
        for name, variables in (("model.npz", model_variables), ("optimizer.npz", optimizer_variables)):
            np.savez(os.path.join(tmp, name),
                     **{f"v{i:05d}": keras.ops.convert_to_numpy(v.value) for i, v in enumerate(variables)})
        if torch_rng:  # dropout of an unseeded layer draws from torch's global generator
            np.savez(os.path.join(tmp, "torch_rng.npz"), **_torch_rng_states())
        write_text(os.path.join(tmp, "state.json"), json.dumps({
            "step": step, "phase": phase, "model_variables": [v.path for v in model_variables],
            "optimizer_variables": [v.path for v in optimizer_variables]}, indent=1))


def read_step(folder, model_variables, optimizer_variables, torch_rng=False):
    """Restores one checkpoint folder into the variables; returns ``(step, phase)``.

    Every file is read first (a torn one raises before any variable changes), then assigned.
    """
    state = json.loads(_read_text(os.path.join(folder, "state.json")))
    step, phase = int(state["step"]), int(state["phase"])
    pairs = []
    for name, key, variables in (("model.npz", "model_variables", model_variables),
                                 ("optimizer.npz", "optimizer_variables", optimizer_variables)):
        # Paths carry per-process names (bert_pretrainer_1/...): the order and shapes must match.
        with np.load(os.path.join(folder, name), allow_pickle=False) as stored:
            values = [stored[f"v{i:05d}"] for i in range(len(stored.files))]
        if [a.shape for a in values] != [tuple(v.shape) for v in variables]:
            raise BertKerasError(f"{folder}: its {len(values)} {key.replace('_', ' ')} do not match this "
                                 f"run's {len(variables)}; use a new model_dir")
        pairs += zip(variables, values)
    rng = None
    if torch_rng and os.path.exists(os.path.join(folder, "torch_rng.npz")):
        with np.load(os.path.join(folder, "torch_rng.npz"), allow_pickle=False) as stored:
            rng = dict(stored)
    for v, value in pairs:
        v.assign(value)
    if rng is not None:
        _set_torch_rng_states(rng)
    return step, phase
