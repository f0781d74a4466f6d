"""Choosing a `tf.distribute.Strategy`: TPU, GPUs, several workers, or the CPU.

    from bert_keras.training.distribute import resolve_strategy
    strategy = resolve_strategy("auto")          # what the host has
    strategy = resolve_strategy("tpu", tpu="local")   # Cloud TPU VM
    strategy = resolve_strategy("multiworker")   # cluster from $TF_CONFIG

Names:
  auto         a TPU if one is attached (Colab's ``COLAB_TPU_ADDR``, ``TPU_NAME``,
               or a TPU VM's ``/dev/accel*``/``/dev/vfio``), else
               MultiWorkerMirroredStrategy if ``TF_CONFIG`` names more than one
               worker, else MirroredStrategy over 2+ GPUs, else one GPU, else
               the default strategy on the CPU.
  cpu          the default strategy (no distribution), on the host CPU.
  gpu          OneDeviceStrategy on the first GPU.
  mirrored     MirroredStrategy over every local GPU (or the given devices,
               e.g. two logical CPUs in tests).
  multiworker  MultiWorkerMirroredStrategy; the cluster and this task's role
               come from ``TF_CONFIG``.
  tpu          TPUStrategy through `tf.distribute.cluster_resolver.TPUClusterResolver`
               (``tpu=""``/None: Colab or ``TPU_NAME``; ``"local"``: a TPU VM;
               a name or ``grpc://`` address: a TPU node).

The strategy must be created before any other TensorFlow work in a process
(multi-worker collectives and TPU initialisation both need that).
"""

from __future__ import annotations

import glob
import json
import logging
import os

import tensorflow as tf

from bert_keras.errors import BertKerasError

logger = logging.getLogger("bert_keras.training")

STRATEGIES = ("auto", "cpu", "gpu", "mirrored", "multiworker", "tpu")


def tf_config_workers() -> int:
    """Number of workers (chief included) named by ``$TF_CONFIG``; 0 without one."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return 0
    try:
        cluster = json.loads(raw).get("cluster", {})
    except (ValueError, AttributeError) as e:
        raise BertKerasError(f"TF_CONFIG is not valid JSON: {e}") from None
    return len(cluster.get("worker", [])) + len(cluster.get("chief", []))


def tpu_attached() -> bool:
    """Whether a TPU looks reachable (without touching it: initialising is costly)."""
    return bool(os.environ.get("COLAB_TPU_ADDR") or os.environ.get("TPU_NAME")
                or glob.glob("/dev/accel*") or os.path.isdir("/dev/vfio") and glob.glob("/dev/vfio/[0-9]*"))


def resolve_strategy(name: str = "auto", tpu: str | None = None, devices=None) -> tf.distribute.Strategy:
    """The `tf.distribute.Strategy` called ``name`` (see the module docstring).

    Args:
      name: one of ``STRATEGIES``.
      tpu: TPU name/address for ``tpu`` (None: from the environment; ``"local"``: TPU VM).
      devices: explicit device list for ``mirrored`` (default: all GPUs).
    Raises:
      BertKerasError: an unknown name, or hardware/cluster the name needs is missing.
    """
    if name not in STRATEGIES:
        raise BertKerasError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    if name == "auto":
        if tpu is not None or tpu_attached():
            try:
                return resolve_strategy("tpu", tpu=tpu)
            except BertKerasError as e:  # e.g. a /dev/vfio device that is no TPU
                if tpu is not None:
                    raise
                logger.warning("strategy auto: %s; falling back", e)
        if tf_config_workers() > 1:
            name = "multiworker"
        else:
            gpus = tf.config.list_logical_devices("GPU")
            name = "mirrored" if len(gpus) > 1 else ("gpu" if gpus else "cpu")
        logger.info("strategy auto -> %s", name)

    if name == "cpu":
        return tf.distribute.get_strategy()
    if name == "gpu":
        gpus = tf.config.list_logical_devices("GPU")
        if not gpus:
            raise BertKerasError("strategy gpu: TensorFlow sees no GPU on this machine")
        return tf.distribute.OneDeviceStrategy(gpus[0].name)
    if name == "mirrored":
        if devices is None:
            gpus = tf.config.list_logical_devices("GPU")
            if not gpus:
                raise BertKerasError("strategy mirrored: TensorFlow sees no GPU on this machine "
                                     "(use --strategy cpu)")
            devices = [d.name for d in gpus]
        return tf.distribute.MirroredStrategy(devices=list(devices))
    if name == "multiworker":
        if not os.environ.get("TF_CONFIG"):
            raise BertKerasError("strategy multiworker needs TF_CONFIG (cluster and task of this worker)")
        tf_config_workers()  # validates the JSON
        return tf.distribute.MultiWorkerMirroredStrategy()
    # tpu
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError, RuntimeError) as e:
        raise BertKerasError(f"strategy tpu: no TPU found ({str(e).splitlines()[0] if str(e) else e!r})") from None
    return tf.distribute.TPUStrategy(resolver)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the one task that writes logs, metrics and the final model."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None:  # no TF_CONFIG: a single local worker
        return True
    return task_type == "chief" or (task_type == "worker" and task_id == 0
                                    and "chief" not in resolver.cluster_spec().as_dict())

