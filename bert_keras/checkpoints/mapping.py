"""Weight name tables: our variables <-> Hugging Face names <-> Google TF1 names.

A converter is this table plus four shape fixes ("kind"):
  copy        same array everywhere (embeddings, LayerNorm, biases)
  dense       Keras/Google kernel [in, out]; PyTorch Linear weight [out, in]
  out_proj    Google's `output_weights` heads are [out, in] like PyTorch
  qkv_kernel  our fused [H, 3H] kernel = concat of query/key/value kernels
  qkv_bias    our fused [3H] bias = concat of query/key/value biases
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert_keras import task_names
from bert_keras.errors import BertKerasError
from bert_keras.task_names import MODEL_TASKS


@dataclasses.dataclass(frozen=True)
class Entry:
    ours: str
    hf: tuple          # Hugging Face names, relative to the encoder prefix for encoder weights
    google: tuple
    kind: str = "copy"
    encoder: bool = True   # HF encoder weights live under "bert." in task checkpoints


def _layer_entries(i: int) -> list[Entry]:
    hf = f"encoder.layer.{i}."
    g = f"bert/encoder/layer_{i}/"
    ours = f"transformer_layer_{i}/"
    qkv = ("query", "key", "value")
    return [
        Entry(ours + "attention/qkv/kernel", tuple(f"{hf}attention.self.{n}.weight" for n in qkv),
              tuple(f"{g}attention/self/{n}/kernel" for n in qkv), "qkv_kernel"),
        Entry(ours + "attention/qkv/bias", tuple(f"{hf}attention.self.{n}.bias" for n in qkv),
              tuple(f"{g}attention/self/{n}/bias" for n in qkv), "qkv_bias"),
        Entry(ours + "attention/output/kernel", (hf + "attention.output.dense.weight",),
              (g + "attention/output/dense/kernel",), "dense"),
        Entry(ours + "attention/output/bias", (hf + "attention.output.dense.bias",),
              (g + "attention/output/dense/bias",)),
        Entry(ours + "attention_layer_norm/gamma", (hf + "attention.output.LayerNorm.weight",),
              (g + "attention/output/LayerNorm/gamma",)),
        Entry(ours + "attention_layer_norm/beta", (hf + "attention.output.LayerNorm.bias",),
              (g + "attention/output/LayerNorm/beta",)),
        Entry(ours + "intermediate/kernel", (hf + "intermediate.dense.weight",),
              (g + "intermediate/dense/kernel",), "dense"),
        Entry(ours + "intermediate/bias", (hf + "intermediate.dense.bias",), (g + "intermediate/dense/bias",)),
        Entry(ours + "output/kernel", (hf + "output.dense.weight",), (g + "output/dense/kernel",), "dense"),
        Entry(ours + "output/bias", (hf + "output.dense.bias",), (g + "output/dense/bias",)),
        Entry(ours + "output_layer_norm/gamma", (hf + "output.LayerNorm.weight",),
              (g + "output/LayerNorm/gamma",)),
        Entry(ours + "output_layer_norm/beta", (hf + "output.LayerNorm.bias",), (g + "output/LayerNorm/beta",)),
    ]


def encoder_entries(num_layers: int) -> list[Entry]:
    entries = [
        Entry("embeddings/token_embedding/embeddings", ("embeddings.word_embeddings.weight",),
              ("bert/embeddings/word_embeddings",)),
        Entry("embeddings/segment_embedding/embeddings", ("embeddings.token_type_embeddings.weight",),
              ("bert/embeddings/token_type_embeddings",)),
        Entry("embeddings/position_embeddings", ("embeddings.position_embeddings.weight",),
              ("bert/embeddings/position_embeddings",)),
        Entry("embeddings/layer_norm/gamma", ("embeddings.LayerNorm.weight",),
              ("bert/embeddings/LayerNorm/gamma",)),
        Entry("embeddings/layer_norm/beta", ("embeddings.LayerNorm.bias",), ("bert/embeddings/LayerNorm/beta",)),
    ]
    for i in range(num_layers):
        entries += _layer_entries(i)
    entries += [
        Entry("pooler/dense/kernel", ("pooler.dense.weight",), ("bert/pooler/dense/kernel",), "dense"),
        Entry("pooler/dense/bias", ("pooler.dense.bias",), ("bert/pooler/dense/bias",)),
    ]
    return entries


def head_entries(task: str | None) -> list[Entry]:
    """Head weights of a task model.  Google's run_classifier names its head
    `output_weights`/`output_bias`, run_squad `cls/squad/...`."""
    if task is None:
        return []
    if task == "pretraining":
        return [
            Entry("masked_lm_head/transform/kernel", ("cls.predictions.transform.dense.weight",),
                  ("cls/predictions/transform/dense/kernel",), "dense", False),
            Entry("masked_lm_head/transform/bias", ("cls.predictions.transform.dense.bias",),
                  ("cls/predictions/transform/dense/bias",), "copy", False),
            Entry("masked_lm_head/layer_norm/gamma", ("cls.predictions.transform.LayerNorm.weight",),
                  ("cls/predictions/transform/LayerNorm/gamma",), "copy", False),
            Entry("masked_lm_head/layer_norm/beta", ("cls.predictions.transform.LayerNorm.bias",),
                  ("cls/predictions/transform/LayerNorm/beta",), "copy", False),
            Entry("masked_lm_head/output_bias", ("cls.predictions.bias",), ("cls/predictions/output_bias",),
                  "copy", False),
            Entry("nsp_head/kernel", ("cls.seq_relationship.weight",), ("cls/seq_relationship/output_weights",),
                  "out_proj", False),
            Entry("nsp_head/bias", ("cls.seq_relationship.bias",), ("cls/seq_relationship/output_bias",),
                  "copy", False),
        ]
    if task == "span":
        return [
            Entry("span_head/kernel", ("qa_outputs.weight",), ("cls/squad/output_weights",), "out_proj", False),
            Entry("span_head/bias", ("qa_outputs.bias",), ("cls/squad/output_bias",), "copy", False),
        ]
    if task in ("classification", "token_classification", "multiple_choice"):
        return [
            Entry("classifier/kernel", ("classifier.weight",), ("output_weights",), "out_proj", False),
            Entry("classifier/bias", ("classifier.bias",), ("output_bias",), "copy", False),
        ]
    raise ValueError(f"unknown task {task!r}; choose one of {', '.join(MODEL_TASKS)}")


def to_ours(entry: Entry, arrays: list[np.ndarray], flavor: str) -> np.ndarray:
    """Their arrays (one, or three for QKV) -> our variable's value."""
    kind = entry.kind
    if kind == "copy":
        return arrays[0]
    if kind == "qkv_bias":
        return np.concatenate(arrays, axis=0)
    if kind == "qkv_kernel":
        return np.concatenate([a.T if flavor == "hf" else a for a in arrays], axis=1)
    if kind == "dense":
        return arrays[0].T if flavor == "hf" else arrays[0]
    if kind == "out_proj":
        return arrays[0].T
    raise AssertionError(kind)


def from_ours(entry: Entry, value: np.ndarray, flavor: str) -> list[np.ndarray]:
    """Our variable's value -> their arrays (inverse of `to_ours`)."""
    kind = entry.kind
    if kind == "copy":
        return [value]
    if kind == "qkv_bias":
        return list(np.split(value, 3, axis=0))
    if kind == "qkv_kernel":
        parts = np.split(value, 3, axis=1)
        return [np.ascontiguousarray(p.T) if flavor == "hf" else p for p in parts]
    if kind == "dense":
        return [np.ascontiguousarray(value.T)] if flavor == "hf" else [value]
    if kind == "out_proj":
        return [np.ascontiguousarray(value.T)]
    raise AssertionError(kind)


def expected_their_shapes(entry: Entry, our_shape: tuple, flavor: str) -> list[tuple]:
    """The shapes a checkpoint must hold for `entry`, given our variable's shape."""
    shape = tuple(our_shape)
    kind = entry.kind
    if kind == "copy":
        return [shape]
    if kind == "qkv_bias":
        return [(shape[0] // 3,)] * 3
    if kind == "qkv_kernel":
        return [(shape[1] // 3, shape[0]) if flavor == "hf" else (shape[0], shape[1] // 3)] * 3
    if kind == "dense":
        return [shape[::-1] if flavor == "hf" else shape]
    if kind == "out_proj":
        return [shape[::-1]]
    raise AssertionError(kind)


# --------------------------------------------------------------------------- model side
def task_of(model) -> str | None:
    """The task name of one of our models (None for a bare `BertEncoder`)."""
    for task, cls in task_names.model_classes().items():
        if isinstance(model, cls):
            return task
    raise BertKerasError(f"not a bert_keras model: {type(model).__name__}")


def weight_names(num_layers: int, task: str | None) -> list[str]:
    """Our stable weight names of a model with ``num_layers`` blocks and head ``task``, in table order."""
    return [e.ours for e in encoder_entries(num_layers) + head_entries(task)]


def model_variables(model) -> dict:
    """Our stable weight names -> the model's variables (the left column of `mapping`).

    A stable name is the Keras variable path the layers give their weights (the layers'
    ``name`` arguments, e.g. ``transformer_layer_0/attention/qkv/kernel``); a model nested in
    another (the encoder of a task model) may carry a prefix before it, which is ignored.

    Raises:
        BertKerasError: a weight of the table has no variable in the model.
    """
    from bert_keras.models import BertEncoder

    enc = model if isinstance(model, BertEncoder) else model.encoder
    wanted = weight_names(len(enc.transformer_layers), task_of(model))
    names = set(wanted)
    by_name = {}
    for variable in model.weights:
        parts = variable.path.split("/")
        for start in range(len(parts)):
            name = "/".join(parts[start:])
            if name in names:
                by_name.setdefault(name, variable)
                break
    missing = [name for name in wanted if name not in by_name]
    if missing:
        raise BertKerasError(f"{type(model).__name__} has no variable for {', '.join(missing[:3])}"
                             + (f" and {len(missing) - 3} more" if len(missing) > 3 else ""))
    return {name: by_name[name] for name in wanted}


# --------------------------------------------------------------------------- Keras layouts
# How a Keras layer stores a tensor that Hugging Face stores otherwise (keras-hub presets and
# Model Garden checkpoints are read under Hugging Face's names): "t" a Dense kernel (in, out);
# "heads_in" an EinsumDense Q/K/V kernel (in, heads, size); "heads_out" the attention output
# kernel (heads, size, out); "flat" a (heads, size) bias; "copy" the same layout.
def keras_to_hf_shape(shape, kind) -> tuple:
    shape = tuple(int(d) for d in shape)
    if kind == "t":
        return shape[::-1]
    if kind == "heads_in":
        return (shape[1] * shape[2], shape[0])
    if kind == "heads_out":
        return (shape[2], shape[0] * shape[1])
    if kind == "flat":
        return (int(np.prod(shape)),)
    return shape


def keras_to_hf(array, kind) -> np.ndarray:
    a = np.asarray(array, dtype=np.float32)
    if kind == "t":
        return a.T
    if kind == "heads_in":
        return a.reshape(a.shape[0], -1).T
    if kind == "heads_out":
        return a.reshape(-1, a.shape[-1]).T
    if kind == "flat":
        return a.reshape(-1)
    return a
