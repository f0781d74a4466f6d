"""Which devices the Keras runner trains on, and the processes of a job with several hosts (JAX).

`select_devices` turns ``strategy`` into Keras device names: on JAX those of a
``keras.distribution.DataParallel`` (every device of every process of the job), on PyTorch
the one device Keras places tensors on.  `join_processes` joins a JAX job of several
processes (`keras.distribution.initialize`) when the environment names one.
"""

from __future__ import annotations

import os

import keras
import numpy as np

from bert_keras.errors import BertKerasError


def backend_module(name):
    """``jax`` or ``torch``: the array library under Keras' backend in this process (installed with it)."""
    try:
        if name == "jax":
            import jax as module
        else:
            import torch as module
    except ImportError as e:
        raise BertKerasError(f"Keras' {name} backend needs {name}, which cannot be imported here ({e}); "
                             f"pip install {name}") from None
    return module


def select_devices(strategy, tpu=None):
    """The devices (Keras names, e.g. ``cpu:0``) a run uses for ``strategy``: on JAX those of the
    ``DataParallel``, on PyTorch the one device Keras places tensors on."""
    from keras import distribution

    if keras.backend.backend() == "torch":  # no keras.distribution: Keras' own device
        if strategy in ("tpu", "mirrored", "multiworker"):
            raise BertKerasError(f"strategy {strategy}: on PyTorch the runner trains on one device; use strategy "
                                 "auto, cpu or gpu, or KERAS_BACKEND=jax or tensorflow for several")
        torch = backend_module("torch")

        if strategy == "gpu" and not torch.cuda.is_available():
            raise BertKerasError("strategy gpu: PyTorch sees no GPU on this machine")
        return ["cuda:0" if torch.cuda.is_available() and strategy != "cpu" else "cpu"]
    if tpu not in (None, "local"):
        raise BertKerasError(f"tpu {tpu!r}: on JAX the runner uses the TPU cores attached to this host "
                             "(tpu local, or leave it out)")
    kind = {"cpu": "cpu", "gpu": "gpu", "tpu": "tpu"}.get(strategy)
    try:
        devices = list(distribution.list_devices(kind))
    except Exception as e:  # noqa: BLE001 - JAX names a missing platform in many ways
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise BertKerasError(f"strategy {strategy}: JAX sees no {kind} device ({why})") from None
    if not devices:
        raise BertKerasError(f"strategy {strategy}: JAX sees no {kind or 'local'} device")
    if strategy not in ("cpu", "gpu"):
        return devices
    # one device of each process of the job (with one process: the first device)
    jax = backend_module("jax")
    firsts = {}
    for d in jax.devices(kind):
        firsts.setdefault(d.process_index, f"{d.platform}:{d.id}")
    return [firsts[p] for p in sorted(firsts)]


def gather_from_processes(array):
    """A JAX array split over the processes of a job, whole, as numpy on every process."""
    backend_module("jax")  # a one-line error where jax is missing
    try:
        from jax.experimental import multihost_utils
    except ImportError as e:
        raise BertKerasError(f"gathering outputs across processes needs jax.experimental ({e})") from None
    return np.asarray(multihost_utils.process_allgather(array, tiled=True))


def join_processes(strategy) -> tuple[int, int]:
    """On JAX, joins the other processes of a job of several hosts; returns (this process, processes).

    A job is several processes when the environment says so (``KERAS_DISTRIBUTION_NUM_PROCESSES``
    above 1, with ``KERAS_DISTRIBUTION_JOB_ADDRESSES`` and ``KERAS_DISTRIBUTION_PROCESS_ID``: what
    `keras.distribution.initialize` reads) or when ``strategy`` is ``multiworker`` (then JAX finds
    the job itself: Cloud TPU pods, SLURM, Open MPI).  CPU devices of several processes talk
    through gloo.  On PyTorch, and for a single process, nothing is joined: (0, 1).
    """
    if keras.backend.backend() != "jax":
        return 0, 1
    jax = backend_module("jax")
    named = int(os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES") or 1) > 1
    if (named or strategy == "multiworker") and not jax.distributed.is_initialized():
        if named:  # processes on CPUs (a test, a CPU cluster) reduce through gloo
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        try:
            keras.distribution.initialize()
        except Exception as e:  # noqa: BLE001 - JAX reports a missing cluster in many ways
            why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise BertKerasError(f"strategy {strategy}: cannot join the job's processes ({why}); set "
                                 "KERAS_DISTRIBUTION_JOB_ADDRESSES, KERAS_DISTRIBUTION_NUM_PROCESSES and "
                                 "KERAS_DISTRIBUTION_PROCESS_ID on every host") from None
    return jax.process_index(), jax.process_count()


def commit_to_devices(variables):
    """Places uncommitted JAX values on their device: the training step returns committed arrays, and
    a first call on uncommitted ones would compile the step a second time (measured: 7 s on BERT-tiny)."""
    jax = backend_module("jax")

    for v in variables:
        value = v.value
        if isinstance(value, jax.Array) and not value.committed:
            v.assign(jax.device_put(value, value.sharding))
