"""Reading raw weights from the three checkpoint layouts, lazily where the format allows.

* Hugging Face: ``config.json`` + ``model.safetensors`` (or ``pytorch_model.bin``,
  read with ``torch.load(weights_only=True)`` only).
* Google TF1: ``bert_config.json`` + ``bert_model.ckpt.{index,data-*}`` (any prefix).
* bert-keras: ``bert_keras.json`` + ``model.safetensors`` with our variable names.
* keras-hub presets (`keras_hub`) and TF Model Garden TF2 checkpoints (`model_garden`),
  offered under Hugging Face's names.
"""

from __future__ import annotations

import glob
import os
import re
import zipfile

import numpy as np

from bert_keras.config import BertConfig, config_keys
from bert_keras.errors import BertKerasError, CheckpointError
from bert_keras.utils import read_json

FORMAT_VERSION = 2  # 2: bert_keras.json lists the folder's files (the completion marker)

# The key under which Hugging Face's config.json and Google's bert_config.json carry the metadata
# their own fields cannot hold (task, max_seq_len, ...).  transformers keeps unknown config keys
# as attributes and writes them back; Google's and tf-models' BertConfig.from_dict copy every key.
METADATA_KEY = "bert_keras_metadata"

OURS_META = "bert_keras.json"
WEIGHTS = "model.safetensors"
VOCAB = "vocab.txt"


class RawCheckpoint:
    """Name -> array access to a checkpoint's weights, whatever its layout.

    Attributes: ``flavor`` ("hf", "google" or "bert_keras"), ``config``
    (`BertConfig`), ``source`` (the weights file, for messages), ``folder``,
    ``vocab_path`` (or None), ``meta`` (the raw config/metadata dict), ``prefix``
    (Hugging Face: "bert." when the encoder is nested in a task model).
    """

    def __init__(self, flavor, config, source, folder, meta, shapes, getter, prefix=""):
        self.flavor, self.config, self.source, self.folder = flavor, config, source, folder
        self.meta, self._shapes, self._get, self.prefix = meta, shapes, getter, prefix
        self.layout = flavor  # the files' own layout ("keras_hub" for a preset offered under "hf" names)
        vocab = os.path.join(folder, VOCAB)
        self.vocab_path = vocab if os.path.exists(vocab) else None

    def __contains__(self, name):
        return name in self._shapes

    def names(self):
        return list(self._shapes)

    def shape(self, name) -> tuple:
        return tuple(self._shapes[name])

    def get(self, name) -> np.ndarray:
        try:
            return np.asarray(self._get(name), dtype=np.float32)
        except Exception as e:  # noqa: BLE001 - a corrupt file surfaces here for lazy formats
            raise CheckpointError(f"{self.source}: cannot read variable {name!r}: {_first_line(e)}") from None


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _read_json(path):
    return read_json(path, CheckpointError)


def _safetensors(path):
    from safetensors import SafetensorError, safe_open

    try:
        handle = safe_open(path, framework="numpy")
        shapes = {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path}: not a readable safetensors file ({_first_line(e)})") from None
    return shapes, handle.get_tensor


def _torch_bin(path):
    try:
        import torch
    except ImportError:
        raise CheckpointError(
            f"{path}: reading PyTorch pickles needs torch (pip install torch==2.13.0 for the CPU build), "
            "or convert the folder to model.safetensors first") from None
    try:
        # weights_only=True: never run arbitrary pickled code from a downloaded file.  mmap=True
        # (zip files, what torch >= 1.6 saves): the shapes come without reading the tensors, so
        # `check_sizes` runs before any tensor is in memory; older pickles are read whole.
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except Exception as e:  # noqa: BLE001 - torch raises many types for corrupt files
        raise CheckpointError(f"{path}: not a readable PyTorch weights file ({_first_line(e)})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: expected a state dict, got {type(state).__name__}")
    tensors = {k: v for k, v in state.items() if hasattr(v, "detach")}
    return {k: tuple(v.shape) for k, v in tensors.items()}, lambda k: tensors[k].detach().float().numpy()


def _normalise_hf_name(name: str) -> str:
    # Checkpoints from 2019-2020 name LayerNorm parameters gamma/beta.
    if "LayerNorm." in name:
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
    return name


# --------------------------------------------------------------------------- config sizes vs. weights
# Where each size shows in the weights: (our field, which tensor, which axis); the tensor is named
# as `mapping.encoder_entries` names it (ours, Hugging Face's, Google's).
_SIZE_TENSORS = {
    "bert_keras": {"word": "embeddings/token_embedding/embeddings",
                   "segment": "embeddings/segment_embedding/embeddings",
                   "position": "embeddings/position_embeddings",
                   "intermediate": ("transformer_layer_0/intermediate/kernel", 1)},
    "hf": {"word": "embeddings.word_embeddings.weight", "segment": "embeddings.token_type_embeddings.weight",
           "position": "embeddings.position_embeddings.weight",
           "intermediate": ("encoder.layer.0.intermediate.dense.weight", 0)},
    "google": {"word": "bert/embeddings/word_embeddings", "segment": "bert/embeddings/token_type_embeddings",
               "position": "bert/embeddings/position_embeddings",
               "intermediate": ("bert/encoder/layer_0/intermediate/dense/kernel", 1)},
}
_LAYER_PATTERNS = {"bert_keras": r"transformer_layer_(\d+)/", "hf": r"encoder\.layer\.(\d+)\.",
                   "google": r"bert/encoder/layer_(\d+)/"}


def check_sizes(values, shapes, flavor, config_path, weights_path, prefix="") -> None:
    """Refuse a config whose sizes disagree with the tensor shapes its weights file records.

    Runs on the raw config dict and the shapes alone (a safetensors header, a
    PyTorch zip's index or a TF checkpoint's index), before a `BertConfig` or
    any weight is built, so a config asking for ``hidden_size: 1000000000``
    next to BERT-BASE weights fails here in milliseconds with one line naming
    the config file, the field, its value and what the weights hold.
    Checked: vocab_size and hidden_size (token embedding), type_vocab_size,
    max_position_embeddings, intermediate_size (first layer), num_layers
    (layer indices present).  A tensor that is absent is left to the loader,
    which names it.

    Args:
      values: the config dict as read (our keys, Google's or Hugging Face's).
      shapes: tensor name -> shape, as the weights file records them.
      flavor: "bert_keras", "hf" or "google".
      config_path, weights_path: the two files, for the message.
      prefix: Hugging Face's "bert." when the encoder is nested in a task model.
    """
    if not isinstance(values, dict):
        return
    keys = config_keys(values)
    names = _SIZE_TENSORS[flavor]
    weights = os.path.basename(os.fspath(weights_path))

    def value_of(field):
        value = values.get(keys.get(field))
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def check(field, name, axis):
        name = prefix + name if flavor == "hf" else name
        value = value_of(field)
        if value is None or name not in shapes:
            return
        shape = tuple(int(d) for d in shapes[name])
        if len(shape) > axis and shape[axis] != value:
            needed = shape[:axis] + (value,) + shape[axis + 1:]
            raise CheckpointError(f"{config_path}: {keys[field]} {value} does not match the weights ({weights} "
                                  f"holds {name} of shape {shape}, the config needs {needed})")

    check("vocab_size", names["word"], 0)
    check("hidden_size", names["word"], 1)
    check("type_vocab_size", names["segment"], 0)
    check("max_position_embeddings", names["position"], 0)
    check("intermediate_size", *names["intermediate"])
    layers = value_of("num_layers")
    pattern = re.compile("^" + re.escape(prefix if flavor == "hf" else "") + _LAYER_PATTERNS[flavor])
    found = sorted({int(m.group(1)) for m in map(pattern.match, shapes) if m})
    if layers is not None and found and found != list(range(layers)):
        held = f"layers {found[0]} to {found[-1]}" if len(found) > 1 else f"layer {found[0]} only"
        raise CheckpointError(f"{config_path}: {keys['num_layers']} {layers} does not match the weights "
                              f"({weights} holds {held}, {len(found)} in all)")


def _open_hf(folder):
    config_path = os.path.join(folder, "config.json")
    meta = _read_json(config_path)
    if not isinstance(meta, dict):  # from_dict names the type
        BertConfig.from_dict(meta, source=config_path)
    st = os.path.join(folder, "model.safetensors")
    if os.path.exists(st):
        shapes, getter = _safetensors(st)
        source = st
    elif os.path.exists(os.path.join(folder, "pytorch_model.bin")):
        source = os.path.join(folder, "pytorch_model.bin")
        shapes, getter = _torch_bin(source)
    else:
        raise CheckpointError(f"{folder}: config.json found but no model.safetensors or pytorch_model.bin")
    renamed = {_normalise_hf_name(n): n for n in shapes}
    shapes = {new: shapes[old] for new, old in renamed.items()}
    prefix = "bert." if any(n.startswith("bert.") for n in shapes) else ""
    check_sizes(meta, shapes, "hf", config_path, source, prefix)
    config = BertConfig.from_dict(meta, source=config_path)
    return RawCheckpoint(flavor="hf", config=config, source=source, folder=folder, meta=meta, shapes=shapes,
                         getter=lambda n: getter(renamed[n]), prefix=prefix)


def _google_prefix(path):
    if os.path.isdir(path):
        index = sorted(glob.glob(os.path.join(path, "*.ckpt*.index")))
        if not index:  # a TF2 checkpoint's own names: ckpt.index, ckpt-12.index (the newest, per `checkpoint`)
            index = sorted(glob.glob(os.path.join(path, "ckpt*.index")))
            named = _newest_in_checkpoint_file(path)
            if named is not None and os.path.exists(named + ".index"):
                return named
        if not index:
            return None
        preferred = [p for p in index if os.path.basename(p) == "bert_model.ckpt.index"]
        return (preferred or index)[0][: -len(".index")]
    if os.path.exists(path + ".index"):
        return path
    return None


def _newest_in_checkpoint_file(folder):
    """The prefix TensorFlow's ``checkpoint`` file names as the newest, or None."""
    try:
        with open(os.path.join(folder, "checkpoint"), encoding="utf-8") as f:
            for line in f:
                m = re.match(r'\s*model_checkpoint_path:\s*"(.*)"', line)
                if m:
                    return os.path.join(folder, m.group(1))
    except OSError:
        return None
    return None


def _open_google(path):
    from bert_keras.checkpoints import model_garden
    from bert_keras.utils import import_tensorflow

    prefix = _google_prefix(path)
    tf = import_tensorflow(f"{prefix}: reading a TensorFlow checkpoint")
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes = reader.get_variable_to_shape_map()  # from the .index file: no tensor is read
    except Exception as e:  # noqa: BLE001 - tf raises DataLossError, NotFoundError, ...
        raise CheckpointError(f"{prefix}: not a readable TensorFlow checkpoint ({_first_line(e)})") from None
    config_path = os.path.join(folder, "bert_config.json")
    object_based = model_garden.is_object_based(shapes)
    if not os.path.exists(config_path) and not object_based:
        raise CheckpointError(f"{folder}: Google checkpoint without bert_config.json")
    if os.path.exists(config_path):
        meta = _read_json(config_path)
        if not isinstance(meta, dict):  # from_dict names the type
            BertConfig.from_dict(meta, source=config_path)
    else:
        meta = model_garden.inferred_config(shapes, prefix)
        config_path = prefix
    if object_based:  # a TF Model Garden checkpoint: offered under Hugging Face's names
        shapes, getter = model_garden.renamed(shapes, reader.get_tensor, prefix)
        check_sizes(meta, shapes, "hf", config_path, prefix)
        config = BertConfig.from_dict(meta, source=config_path)
        raw = RawCheckpoint(flavor="hf", config=config, source=prefix, folder=folder, meta=meta, shapes=shapes,
                            getter=getter)
        raw.layout = "model_garden"
        return raw
    check_sizes(meta, shapes, "google", config_path, prefix)
    config = BertConfig.from_dict(meta, source=config_path)
    return RawCheckpoint(flavor="google", config=config, source=prefix, folder=folder, meta=meta,
                         shapes=shapes, getter=reader.get_tensor)


def check_complete(folder, meta) -> None:
    """Refuse a bert-keras folder that is not a complete save.

    `save_checkpoint` writes ``bert_keras.json`` last, with the name and size
    of every other file under ``"files"`` (the completion marker); a folder
    without that record (interrupted, or saved before the record existed) or
    with a file missing or of another size is not loaded.
    """
    files = meta.get("files")
    if not isinstance(files, dict):
        raise CheckpointError(f"{folder}: incomplete bert-keras checkpoint: {OURS_META} has no 'files' record "
                              "(interrupted or older save); save it again")
    for name, size in files.items():
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise CheckpointError(f"{folder}: incomplete bert-keras checkpoint: {name} is missing")
        if os.path.getsize(path) != size:
            raise CheckpointError(f"{folder}: incomplete bert-keras checkpoint: {name} has "
                                  f"{os.path.getsize(path)} bytes, {OURS_META} records {size} "
                                  "(cut short, or changed after saving)")


def _open_ours(folder):
    meta_path = os.path.join(folder, OURS_META)
    meta = _read_json(meta_path)
    if not isinstance(meta, dict) or "config" not in meta:
        raise CheckpointError(f"{meta_path}: missing field 'config'")
    check_complete(folder, meta)
    st = os.path.join(folder, WEIGHTS)
    if not os.path.exists(st):
        raise CheckpointError(f"{folder}: {OURS_META} found but no {WEIGHTS}")
    shapes, getter = _safetensors(st)
    check_sizes(meta["config"], shapes, "bert_keras", meta_path, st)
    config = BertConfig.from_dict(meta["config"], source=meta_path)
    return RawCheckpoint(flavor="bert_keras", config=config, source=st, folder=folder, meta=meta,
                         shapes=shapes, getter=getter)


def open_checkpoint(path) -> RawCheckpoint:
    """Detect the layout of ``path`` (a folder, or a Google checkpoint prefix; local or a URL such as
    ``gs://``, read from a local copy: `bert_keras.checkpoints.remote`) and open it."""
    path = os.fspath(path)
    if "://" in path:
        from bert_keras.checkpoints import remote

        path = remote.local_copy(path)
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise CheckpointError(f"checkpoint not found: {path}")
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, OURS_META)):
            return _open_ours(path)
        if _google_prefix(path):
            return _open_google(path)
        from bert_keras.checkpoints import keras_hub

        if keras_hub.is_preset(path):
            return keras_hub.open_preset(path)
        if os.path.exists(os.path.join(path, "config.json")):
            return _open_hf(path)
        if os.path.exists(os.path.join(path, "bert_config.json")):
            raise CheckpointError(f"{path}: bert_config.json found but no bert_model.ckpt.index")
        raise CheckpointError(
            f"{path}: no checkpoint found (expected {OURS_META}, config.json + model.safetensors or "
            "pytorch_model.bin, bert_config.json + bert_model.ckpt.*, or a keras-hub preset)")
    if _google_prefix(path):
        return _open_google(path)
    raise CheckpointError(f"{path}: not a checkpoint folder")


def vocab_size_of(path) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def check_vocab(raw: RawCheckpoint, config: BertConfig):
    if raw.vocab_path is None:
        return
    n = vocab_size_of(raw.vocab_path)
    if n > config.vocab_size:
        raise BertKerasError(
            f"{raw.vocab_path}: {n} tokens but the model's token embedding has {config.vocab_size} rows")
