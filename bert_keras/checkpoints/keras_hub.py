"""keras-hub presets: read with h5py alone, written through keras-hub's own converter.

A keras-hub preset folder holds ``config.json`` (the backbone: ``"registered_name":
"keras_hub>BertBackbone"``), ``model.weights.h5`` (its weights, in Keras 3's weights format),
for a task such as ``BertTextClassifier`` also ``task.json`` + ``task.weights.h5`` (its head), ``tokenizer.json`` and ``assets/tokenizer/vocabulary.txt``.

Reading needs no keras-hub: the backbone's variables are found in the ``.h5`` file by the layer
names keras-hub gives them (``token_embedding``, ``transformer_layer_3``, ``pooled_dense``, ...,
recorded in each group's ``name`` attribute) and offered under Hugging Face's names, so the one
name table in `mapping` loads them.  keras-hub's BERT computes the encoder's GELU with the tanh
approximation (as Google's original code did): the config read here says so
(``hidden_act="gelu_approximate"``), so the model computes what keras-hub computes.

Writing goes through keras-hub itself (``BertBackbone.from_preset`` on a Hugging Face folder,
then ``save_to_preset``), so what it writes is what keras-hub writes.
"""

from __future__ import annotations

import os
import tempfile
import warnings

import numpy as np

from bert_keras.errors import BertKerasError, CheckpointError
from bert_keras.utils import read_json

CONFIG = "config.json"
BACKBONE_WEIGHTS = "model.weights.h5"
TASK_CONFIG, TASK_WEIGHTS = "task.json", "task.weights.h5"
VOCABULARY = os.path.join("assets", "tokenizer", "vocabulary.txt")
METADATA = "metadata.json"
_BACKBONE = "keras_hub>BertBackbone"
# the keras-hub tasks whose head maps onto one of ours
_TASK_HEADS = {"keras_hub>BertTextClassifier": "classification", "keras_hub>BertMaskedLM": "pretraining"}
_HF_ARCHITECTURE = {_BACKBONE: "BertModel", "keras_hub>BertTextClassifier": "BertForSequenceClassification",
                    "keras_hub>BertMaskedLM": "BertForMaskedLM"}


def _json(path):
    return read_json(path, CheckpointError)


def is_preset(folder) -> bool:
    """Whether ``folder`` is a keras-hub preset (its config.json names a keras-hub class)."""
    path = os.path.join(folder, CONFIG)
    if not (os.path.isfile(path) and os.path.isfile(os.path.join(folder, BACKBONE_WEIGHTS))):
        return False
    try:
        config = _json(path)
    except CheckpointError:
        return False
    return isinstance(config, dict) and str(config.get("registered_name", "")).startswith("keras_hub>")


def _backbone_config(folder):
    """(the preset's class: its task's when task.json is there, its backbone config)."""
    path = os.path.join(folder, CONFIG)
    backbone = _json(path)
    if not isinstance(backbone, dict) or backbone.get("registered_name") != _BACKBONE:
        name = backbone.get("registered_name") if isinstance(backbone, dict) else None
        raise CheckpointError(f"{path}: keras-hub preset of {name!r}, not a BERT model (expected {_BACKBONE})")
    values = backbone.get("config")
    if not isinstance(values, dict):
        raise CheckpointError(f"{path}: field 'config' must be a JSON object")
    name = _BACKBONE
    task_path = os.path.join(folder, TASK_CONFIG)
    if os.path.isfile(task_path):
        task = _json(task_path)
        name = str(task.get("registered_name")) if isinstance(task, dict) else name
    return name, values


def _hf_config(values, path):
    keys = {"vocabulary_size": "vocab_size", "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads",
            "hidden_dim": "hidden_size", "intermediate_dim": "intermediate_size",
            "max_sequence_length": "max_position_embeddings", "num_segments": "type_vocab_size"}
    missing = [k for k in keys if k not in values]
    if missing:
        raise CheckpointError(f"{path}: field 'config' has no {missing[0]!r}")
    hf = {theirs: values[ours] for ours, theirs in keys.items()}
    dropout = values.get("dropout", 0.1)
    hf.update(model_type="bert", hidden_act="gelu_approximate", layer_norm_eps=1e-12,
              hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    return hf


def _layers(h5, where):
    """{keras-hub layer name: its h5 group}, from the ``name`` attribute Keras records."""
    groups = h5.get("layers")
    if groups is None:
        raise CheckpointError(f"{where}: no 'layers' group: not a Keras weights file")
    out = {}
    for key in groups:
        g = groups[key]
        if "vars" in g:
            out[str(g["vars"].attrs.get("name", key))] = g
    return out


def _var(group, where, *path):
    node = group
    for part in path + ("vars",):
        if part not in node:
            raise CheckpointError(f"{where}: missing {'/'.join((group.name,) + path)}")
        node = node[part]
    return node


def _backbone_tensors(layers, num_layers, where):
    """Hugging Face name -> (h5 dataset, how to turn it into Hugging Face's shape)."""
    def need(name):
        if name not in layers:
            raise CheckpointError(f"{where}: no layer {name!r} (a keras-hub BertBackbone has one)")
        return layers[name]

    def dense(group, *path):  # Dense: kernel (in, out) -> weight (out, in)
        v = _var(group, where, *path)
        return [(v["0"], "t"), (v["1"], "copy")]

    def norm(group, *path):
        v = _var(group, where, *path)
        return [(v["0"], "copy"), (v["1"], "copy")]

    out = {"embeddings.word_embeddings.weight": (_var(need("token_embedding"), where)["0"], "copy"),
           "embeddings.position_embeddings.weight": (_var(need("position_embedding"), where)["0"], "copy"),
           "embeddings.token_type_embeddings.weight": (_var(need("segment_embedding"), where)["0"], "copy")}
    out.update(zip(("embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"),
                   norm(need("embeddings_layer_norm"))))
    for i in range(num_layers):
        block, hf = need(f"transformer_layer_{i}"), f"encoder.layer.{i}."
        for part in ("query", "key", "value"):  # EinsumDense: kernel (in, heads, size), bias (heads, size)
            v = _var(block, where, "_self_attention_layer", f"{part}_dense")
            out[f"{hf}attention.self.{part}.weight"] = (v["0"], "heads_in")
            out[f"{hf}attention.self.{part}.bias"] = (v["1"], "flat")
        v = _var(block, where, "_self_attention_layer", "output_dense")  # kernel (heads, size, out)
        out[f"{hf}attention.output.dense.weight"] = (v["0"], "heads_out")
        out[f"{hf}attention.output.dense.bias"] = (v["1"], "copy")
        for ours, path, kind in (("attention.output.LayerNorm", "_self_attention_layer_norm", norm),
                                 ("intermediate.dense", "_feedforward_intermediate_dense", dense),
                                 ("output.dense", "_feedforward_output_dense", dense),
                                 ("output.LayerNorm", "_feedforward_layer_norm", norm)):
            out.update(zip((f"{hf}{ours}.weight", f"{hf}{ours}.bias"), kind(block, path)))
    if "pooled_dense" in layers:
        out.update(zip(("pooler.dense.weight", "pooler.dense.bias"), dense(layers["pooled_dense"])))
    return out


def _head_tensors(head, where):
    """A task's head in ``task.weights.h5`` under Hugging Face's names: the classifier's ``logits``,
    or the masked-LM head (dense + LayerNorm + output bias; its decoder is the word embeddings)."""
    if "logits" in head:
        v = _var(head["logits"], where)
        return {"classifier.weight": (v["0"], "t"), "classifier.bias": (v["1"], "copy")}
    if "mlm_head" in head:
        group = head["mlm_head"]
        dense, norm = _var(group, where, "_intermediate_dense"), _var(group, where, "_intermediate_layer_norm")
        return {"cls.predictions.transform.dense.weight": (dense["0"], "t"),
                "cls.predictions.transform.dense.bias": (dense["1"], "copy"),
                "cls.predictions.transform.LayerNorm.weight": (norm["0"], "copy"),
                "cls.predictions.transform.LayerNorm.bias": (norm["1"], "copy"),
                "cls.predictions.bias": (_var(group, where)["0"], "copy")}
    return {}


def open_preset(folder):
    """A keras-hub preset as a `formats.RawCheckpoint` under Hugging Face's names."""
    import h5py

    from bert_keras.checkpoints.formats import METADATA_KEY, RawCheckpoint, check_sizes
    from bert_keras.checkpoints.mapping import keras_to_hf, keras_to_hf_shape
    from bert_keras.config import BertConfig

    config_path = os.path.join(folder, CONFIG)
    name, values = _backbone_config(folder)
    meta = _hf_config(values, config_path)
    source = os.path.join(folder, BACKBONE_WEIGHTS)
    try:
        h5 = h5py.File(source, "r")
    except OSError as e:
        raise CheckpointError(f"{source}: not a readable HDF5 weights file ({e})") from None
    tensors = _backbone_tensors(_layers(h5, source), int(meta["num_hidden_layers"]), source)
    sources = {n: source for n in tensors}
    if name in _TASK_HEADS:
        task_file = os.path.join(folder, TASK_WEIGHTS)
        if os.path.isfile(task_file):
            try:
                head = _layers(h5py.File(task_file, "r"), task_file)
            except OSError as e:
                raise CheckpointError(f"{task_file}: not a readable HDF5 weights file ({e})") from None
            found = _head_tensors(head, task_file)
            tensors.update(found)
            sources.update({n: task_file for n in found})
            if name == "keras_hub>BertMaskedLM" and found:
                # keras-hub's MaskedLMHead: exact GELU and LayerNorm epsilon 1e-5; ours computes the encoder's
                warnings.warn(f"{config_path}: keras-hub's masked-LM head computes exact GELU with LayerNorm "
                              "epsilon 1e-5; read here it computes this encoder's (gelu_approximate, 1e-12), as "
                              "Hugging Face's head does: logits within about 1e-3", stacklevel=3)
    elif name != _BACKBONE:
        warnings.warn(f"{config_path}: a keras-hub {name.split('>')[-1]} preset: its encoder is read, its task "
                      "head is not (it has no counterpart here)", stacklevel=3)
    meta["architectures"] = [_HF_ARCHITECTURE.get(name, "BertModel")]
    extra = _json(os.path.join(folder, METADATA)) if os.path.isfile(os.path.join(folder, METADATA)) else {}
    stored = extra.get(METADATA_KEY) if isinstance(extra, dict) else None
    if isinstance(stored, dict):
        stored = dict(stored)
        labels = stored.pop("labels", None)
        if isinstance(labels, list):
            meta["id2label"] = {str(i): str(x) for i, x in enumerate(labels)}
        meta[METADATA_KEY] = stored
    tokenizer = os.path.join(folder, "tokenizer.json")
    if os.path.isfile(tokenizer):
        lowercase = ((_json(tokenizer) or {}).get("config") or {}).get("lowercase")
        if isinstance(lowercase, bool):
            meta["do_lower_case"] = lowercase
    shapes = {n: keras_to_hf_shape(d.shape, kind) for n, (d, kind) in tensors.items()}
    check_sizes(meta, shapes, "hf", config_path, source)
    config = BertConfig.from_dict(meta, source=config_path)

    def get(n):
        dataset, kind = tensors[n]
        return keras_to_hf(dataset[()], kind)

    raw = RawCheckpoint(flavor="hf", config=config, source=source, folder=folder, meta=meta, shapes=shapes,
                        getter=get)
    raw.layout, raw.h5 = "keras_hub", h5  # the file stays open while the weights are read
    vocab = os.path.join(folder, VOCABULARY)
    raw.vocab_path = vocab if os.path.isfile(vocab) else None
    return raw


# --------------------------------------------------------------------------- writing
def save_preset(model, folder, vocab_path, lower_case, metadata, save_hf, name=None):
    """Write ``model`` into ``folder`` (empty or new) as a keras-hub preset, through keras-hub.

    ``save_hf(model, tmp)`` writes the Hugging Face folder keras-hub converts from.  A
    classification model becomes a ``BertTextClassifier`` preset (its head set here); any
    other model's encoder a ``BertBackbone`` preset (with a warning naming the head left out).
    ``name``: the folder as messages call it (``folder`` may be a temporary sibling).
    """
    name = name or folder
    try:
        import keras_hub
    except ImportError:
        raise BertKerasError(f"{name or folder}: writing a keras-hub preset needs keras-hub (pip install keras-hub)") from None
    from bert_keras.checkpoints.mapping import model_variables, task_of
    from bert_keras.models import BertEncoder

    task = task_of(model)
    enc = model if isinstance(model, BertEncoder) else model.encoder
    if enc.config.hidden_act not in ("gelu_approximate", "gelu_new", "gelu_pytorch_tanh"):
        warnings.warn(f"{name}: keras-hub's BertBackbone computes GELU with the tanh approximation; this model "
                      f"uses {enc.config.hidden_act!r}, so keras-hub's outputs will differ slightly from these",
                      stacklevel=3)
    if task not in (None, "classification"):
        warnings.warn(f"{name}: keras-hub has no BERT {task} task: the encoder is written, its head is not",
                      stacklevel=3)
    with tempfile.TemporaryDirectory(prefix=".keras-hub-") as tmp:
        hf = os.path.join(tmp, "hf")
        save_hf(model if task == "classification" else enc, hf, vocab_path, lower_case)
        backbone = keras_hub.models.BertBackbone.from_preset(hf)
        tokenizer = None
        vocab = os.path.join(hf, "vocab.txt")
        if os.path.isfile(vocab):
            if lower_case is None:  # nothing recorded: a vocabulary without upper-case tokens is uncased
                from bert_keras.checkpoints.casing import vocab_is_cased

                lower_case = not vocab_is_cased(vocab)[0]
            tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=bool(lower_case))
        if task == "classification":
            preprocessor = None
            if tokenizer is not None:
                seq_len = (metadata or {}).get("max_seq_len")
                seq_len = seq_len if isinstance(seq_len, int) and not isinstance(seq_len, bool) else 512
                preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=seq_len)
            clf = keras_hub.models.BertTextClassifier(backbone, num_classes=model.num_classes,
                                                      preprocessor=preprocessor)
            variables = model_variables(model)
            clf.get_layer("logits").kernel.assign(np.asarray(variables["classifier/kernel"].numpy(), np.float32))
            clf.get_layer("logits").bias.assign(np.asarray(variables["classifier/bias"].numpy(), np.float32))
            clf.save_to_preset(folder)
        else:
            backbone.save_to_preset(folder)
            if tokenizer is not None:
                tokenizer.save_to_preset(folder)
    path = os.path.join(folder, METADATA)
    from bert_keras.checkpoints.formats import METADATA_KEY
    from bert_keras.writing import write_json

    extra = _json(path) if os.path.isfile(path) else {}
    if metadata:
        extra[METADATA_KEY] = dict(metadata)
    write_json(path, extra)
