"""Load and save BERT checkpoints: Hugging Face, Google TF1 and bert-keras folders.

    model = load_checkpoint("path/to/folder", task="classification", num_classes=2)
    save_checkpoint(model, "out/")                     # bert-keras layout
    save_checkpoint(model, "hf/", flavor="huggingface")  # config.json + model.safetensors + vocab.txt
    save_checkpoint(model, "g/", flavor="google")      # bert_config.json + bert_model.ckpt.*
"""

from __future__ import annotations

import os
import re
import shutil
import warnings

import numpy as np

from bert_keras.checkpoints import mapping
from bert_keras.checkpoints.formats import OURS_META, VOCAB, WEIGHTS, check_vocab, open_checkpoint
from bert_keras import task_names
from bert_keras.checkpoints.mapping import encoder_entries, head_entries
from bert_keras.task_names import MODEL_TASKS as TASKS  # noqa: F401 - bert_keras.checkpoints.TASKS
from bert_keras.errors import BertKerasError, CheckpointError
from bert_keras.utils import atomic_folder, atomic_write, foreign_entries, import_tensorflow, write_json

__all__ = ["load_checkpoint", "save_checkpoint", "model_variables", "task_of", "open_checkpoint",
           "checkpoint_task", "checkpoint_metadata", "recorded_casing", "check_replaceable",
           "is_complete_checkpoint", "METADATA_KEY", "TASKS"]

FORMAT_VERSION = 2  # 2: bert_keras.json lists the folder's files (the completion marker)

# The key under which Hugging Face's config.json and Google's bert_config.json carry the metadata
# their own fields cannot hold (task, max_seq_len, ...).  transformers keeps unknown config keys
# as attributes and writes them back; Google's and tf-models' BertConfig.from_dict copy every key.
METADATA_KEY = "bert_keras_metadata"
_DEFAULT_HF_LABEL = re.compile(r"LABEL_(\d+)")



# --------------------------------------------------------------------------- model side
def task_of(model) -> str | None:
    """The task name of one of our models (None for a bare `BertEncoder`)."""
    for task, cls in task_names.model_classes().items():
        if isinstance(model, cls):
            return task
    raise BertKerasError(f"not a bert_keras model: {type(model).__name__}")


def model_variables(model) -> dict:
    """Our stable weight names -> the model's variables (the left column of `mapping`)."""
    from bert_keras.models import BertEncoder

    enc = model if isinstance(model, BertEncoder) else model.encoder
    emb = enc.embeddings
    out = {
        "embeddings/token_embedding/embeddings": emb.token_embedding.embeddings,
        "embeddings/segment_embedding/embeddings": emb.segment_embedding.embeddings,
        "embeddings/position_embeddings": emb.position_embeddings,
        "embeddings/layer_norm/gamma": emb.layer_norm.gamma,
        "embeddings/layer_norm/beta": emb.layer_norm.beta,
    }
    for i, block in enumerate(enc.transformer_layers):
        p = f"transformer_layer_{i}/"
        for name, layer in (("attention/qkv", block.attention.qkv),
                            ("attention/output", block.attention.output_dense),
                            ("intermediate", block.intermediate), ("output", block.output_dense)):
            out[p + name + "/kernel"] = layer.kernel
            out[p + name + "/bias"] = layer.bias
        for name, layer in (("attention_layer_norm", block.attention_layer_norm),
                            ("output_layer_norm", block.output_layer_norm)):
            out[p + name + "/gamma"] = layer.gamma
            out[p + name + "/beta"] = layer.beta
    out["pooler/dense/kernel"] = enc.pooler.dense.kernel
    out["pooler/dense/bias"] = enc.pooler.dense.bias
    task = task_of(model)
    if task == "pretraining":
        head = model.masked_lm_head
        out.update({
            "masked_lm_head/transform/kernel": head.transform.kernel,
            "masked_lm_head/transform/bias": head.transform.bias,
            "masked_lm_head/layer_norm/gamma": head.layer_norm.gamma,
            "masked_lm_head/layer_norm/beta": head.layer_norm.beta,
            "masked_lm_head/output_bias": head.output_bias,
            "nsp_head/kernel": model.nsp_head.kernel,
            "nsp_head/bias": model.nsp_head.bias,
        })
    elif task == "span":
        out["span_head/kernel"] = model.span_head.kernel
        out["span_head/bias"] = model.span_head.bias
    elif task is not None:
        out["classifier/kernel"] = model.classifier.kernel
        out["classifier/bias"] = model.classifier.bias
    return out


def _build_model(config, task, head_kwargs, dtype):
    classes = task_names.model_classes()
    encoder = classes[None](config, dtype=dtype)
    if task is None:
        return encoder
    return classes[task](encoder, **head_kwargs)


# --------------------------------------------------------------------------- loading
def checkpoint_task(path) -> str | None:
    """The task whose head a checkpoint holds (None for a bare encoder)."""
    raw = open_checkpoint(path)
    if raw.flavor == "bert_keras":
        return raw.meta.get("task")
    if raw.flavor == "hf":
        by_architecture = {v: k for k, v in task_names.HF_ARCHITECTURES.items()}
        for arch in raw.meta.get("architectures") or []:
            if arch in by_architecture and (by_architecture[arch] is None
                                            or _has_head(raw, by_architecture[arch])):
                return by_architecture[arch]
    for task in ("pretraining", "span", "classification"):
        if _has_head(raw, task):
            return task
    return None


def _their_names(raw, entry):
    if raw.flavor == "bert_keras":
        return [entry.ours]
    if raw.flavor == "hf":
        prefix = raw.prefix if entry.encoder else ""
        return [prefix + n for n in entry.hf]
    return list(entry.google)


def _checkpoint_num_classes(raw, task):
    """The head size stored in the checkpoint for a classification-style task, if any."""
    entry = head_entries(task)[0]
    name = _their_names(raw, entry)[0]
    if name not in raw:
        return None
    shape = raw.shape(name)
    return shape[-1] if raw.flavor == "bert_keras" else shape[0]


def _has_head(raw, task):
    entries = head_entries(task)
    present = [all(n in raw for n in _their_names(raw, e)) for e in entries]
    if any(present) and not all(present):
        missing = [_their_names(raw, e)[0] for e, p in zip(entries, present) if not p]
        raise CheckpointError(f"{raw.source}: incomplete {task} head, missing variable {missing[0]!r}")
    return bool(entries) and all(present)


def _assign(raw, entries, variables):
    flavor = "hf" if raw.flavor == "hf" else "google"
    for entry in entries:
        var = variables[entry.ours]
        names = _their_names(raw, entry)
        for name in names:
            if name not in raw:
                raise CheckpointError(f"{raw.source}: missing variable {name!r} (for {entry.ours})")
        if raw.flavor == "bert_keras":
            expected = [tuple(var.shape)]
        else:
            expected = mapping.expected_their_shapes(entry, tuple(var.shape), flavor)
        for name, shape in zip(names, expected):
            if raw.shape(name) != tuple(shape):
                raise CheckpointError(
                    f"{raw.source}: variable {name!r} has shape {raw.shape(name)} but the model expects "
                    f"{tuple(shape)} ({entry.ours})")
        arrays = [raw.get(n) for n in names]
        value = arrays[0] if raw.flavor == "bert_keras" else mapping.to_ours(entry, arrays, flavor)
        var.assign(value.astype(np.float32))


def load_checkpoint(path, task=None, dtype=None, **head_kwargs):
    """Build a model from a checkpoint folder and load its weights.

    Args:
        path: a Hugging Face folder (config.json + model.safetensors or
            pytorch_model.bin), a Google folder (bert_config.json +
            bert_model.ckpt.*) or its checkpoint prefix, or a folder written by
            `save_checkpoint`.
        task: None -> `BertEncoder`; "pretraining" -> `BertPretrainer` (MLM and
            NSP heads); "classification", "token_classification", "span",
            "multiple_choice" -> the task model, its head loaded when the
            checkpoint has one with matching size, else freshly initialised.
        dtype: a Keras dtype policy name such as "mixed_bfloat16" (default: global).
        **head_kwargs: e.g. ``num_classes=3``, ``dropout=0.1``.

    Returns:
        The Keras model, with ``model.vocab_path`` set to the folder's vocab.txt (or None).
    """
    if task not in (None,) + task_names.MODEL_TASKS:
        raise BertKerasError(f"unknown task {task!r}; choose one of {', '.join(task_names.MODEL_TASKS)}")
    raw = open_checkpoint(path)
    config = raw.config
    check_vocab(raw, config)
    load_head = False
    if task is not None:
        load_head = _has_head(raw, task)
        if task in task_names.CLASS_HEADS and load_head:
            stored = _checkpoint_num_classes(raw, task)
            wanted = head_kwargs.setdefault("num_classes", stored)
            if wanted != stored:
                warnings.warn(f"{raw.source}: the checkpoint's head has {stored} classes, {wanted} requested: "
                              "using a new, randomly initialised head", stacklevel=2)
                load_head = False
        elif task == "pretraining" and not load_head:
            warnings.warn(f"{raw.source}: no MLM/NSP heads in the checkpoint: new heads are initialised "
                          "(the MLM projection stays tied to the loaded embeddings)", stacklevel=2)
        elif task in task_names.CLASS_HEADS and "num_classes" not in head_kwargs:
            raise BertKerasError(f"{raw.source} has no {task} head: pass num_classes")
    model = _build_model(config, task, head_kwargs, dtype)
    variables = model_variables(model)
    entries = encoder_entries(config.num_layers) + (head_entries(task) if load_head else [])
    _assign(raw, entries, variables)
    model.vocab_path = raw.vocab_path
    from bert_keras.checkpoints.casing import recorded_lower_case

    model.lower_case = recorded_lower_case(raw.meta)  # None: resolved where a tokenizer is built
    return model


def _hf_labels(raw):
    """The label names of a Hugging Face config.json's ``id2label``, or None.

    None when there is no ``id2label`` or when it holds only transformers'
    defaults (``LABEL_0``, ``LABEL_1``, ...), which name no class.
    """
    id2label = raw.meta.get("id2label")
    if id2label is None:
        return None
    where = os.path.join(raw.folder, "config.json")
    if not isinstance(id2label, dict):
        raise CheckpointError(f"{where}: field 'id2label' must map class ids to names, got "
                              f"{type(id2label).__name__}")
    labels = {}
    for key, name in id2label.items():
        if not str(key).isdigit():
            raise CheckpointError(f"{where}: field 'id2label' has key {key!r}, not a class id")
        labels[int(key)] = str(name)
    if sorted(labels) != list(range(len(labels))):
        raise CheckpointError(f"{where}: field 'id2label' has class ids {sorted(labels)}, not 0..{len(labels) - 1}")
    names = [labels[i] for i in range(len(labels))]
    if all((m := _DEFAULT_HF_LABEL.fullmatch(n)) and int(m.group(1)) == i for i, n in enumerate(names)):
        return None
    return names


def checkpoint_metadata(path) -> dict:
    """What a checkpoint records beyond config and weights, as ``bert_keras.json``'s ``"metadata"``.

    ``path`` is a checkpoint folder (or an already opened `open_checkpoint`).
    bert-keras folders: their ``"metadata"`` (task, labels, max_seq_len,
    lower_case, ... as `finetune` writes them).  Hugging Face folders: the
    ``bert_keras_metadata`` object of config.json (`METADATA_KEY`), with
    ``labels`` from ``id2label`` when it names the classes (transformers'
    default ``LABEL_<n>`` names are not labels).  Google folders: the
    ``bert_keras_metadata`` object of bert_config.json.  ``{}`` when nothing is
    recorded.
    """
    raw = path if hasattr(path, "flavor") else open_checkpoint(path)
    meta = raw.meta if isinstance(raw.meta, dict) else {}
    stored = meta.get("metadata") if raw.flavor == "bert_keras" else meta.get(METADATA_KEY)
    if stored is not None and not isinstance(stored, dict):
        field = "metadata" if raw.flavor == "bert_keras" else METADATA_KEY
        raise CheckpointError(f"{_meta_file(raw)}: field {field!r} must be a JSON object, got "
                              f"{type(stored).__name__}")
    out = dict(stored or {})
    if raw.flavor == "hf":
        labels = _hf_labels(raw)
        if labels is not None:
            out["labels"] = labels
    return out


def _meta_file(raw):
    name = {"bert_keras": OURS_META, "hf": "config.json", "google": "bert_config.json"}[raw.flavor]
    return os.path.join(raw.folder, name)


def recorded_casing(raw, vocab_path=None):
    """The casing a checkpoint records or shows (`casing.Casing`), or None when nothing says.

    Looks where `casing.resolve_casing` looks (the config, ``bert_keras.json``'s
    ``lower_case`` or its metadata's, Hugging Face's tokenizer files, Google's
    folder names, the vocabulary), but returns None instead of assuming
    uncased when there is nothing to go by.
    """
    from bert_keras.checkpoints.casing import Casing, checkpoint_casing, recorded_lower_case

    if raw.flavor == "bert_keras" and recorded_lower_case(raw.meta) is None:
        value = recorded_lower_case(raw.meta.get("metadata"))
        if value is not None:
            return Casing(value, f"recorded in {OURS_META} metadata")
    if vocab_path is not None:
        from bert_keras.checkpoints.casing import resolve_casing

        meta_file = os.path.basename(_meta_file(raw))
        casing = resolve_casing(raw.folder, raw.meta, vocab_path, None, meta_file)
    else:
        casing = checkpoint_casing(raw)
    if casing.reason.startswith("nothing recorded"):
        return None
    return casing


def is_complete_checkpoint(folder) -> bool:
    """Whether ``folder`` is a complete bert-keras save (its completion marker matches, see `save_checkpoint`)."""
    from bert_keras.checkpoints.formats import check_complete
    from bert_keras.utils import read_json

    meta_path = os.path.join(os.fspath(folder), OURS_META)
    if not os.path.isfile(meta_path):
        return False
    try:
        meta = read_json(meta_path, CheckpointError)
        check_complete(os.fspath(folder), meta if isinstance(meta, dict) else {})
    except CheckpointError:
        return False
    return True


# --------------------------------------------------------------------------- saving
def _write_safetensors(path, tensors, metadata=None):
    from safetensors.numpy import save_file

    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=metadata))


def _copy_vocab(vocab_path, folder, config):
    if not vocab_path:
        return
    if not os.path.exists(vocab_path):
        raise BertKerasError(f"vocabulary not found: {vocab_path}")
    from bert_keras.checkpoints.formats import vocab_size_of

    n = vocab_size_of(vocab_path)
    if n > config.vocab_size:
        raise BertKerasError(f"{vocab_path}: {n} tokens but the model's token embedding has "
                             f"{config.vocab_size} rows")
    shutil.copyfile(vocab_path, os.path.join(folder, VOCAB))  # folder: atomic_folder's temporary


def _head_config(model, task):
    if task in task_names.CLASS_HEADS:
        return {"num_classes": model.num_classes, "dropout": model.dropout_rate}
    if task == "multiple_choice":
        return {"dropout": model.dropout_rate}
    return {}


# What save_checkpoint writes in the bert_keras flavor: a folder with our
# bert_keras.json and nothing else than these is a previous save that may be replaced.
_SAVED_NAMES = (OURS_META, WEIGHTS, VOCAB)


def check_replaceable(folder) -> None:
    """Accept an existing non-empty ``folder`` only when it is a previous bert-keras save.

    Raises:
      BertKerasError: naming the folder and what makes it foreign.
    """
    if not os.path.exists(os.path.join(folder, OURS_META)):
        raise BertKerasError(f"{folder}: folder exists, is not empty and is not a bert-keras checkpoint; "
                             "refusing to replace it (choose another folder)")
    foreign = foreign_entries(folder, _SAVED_NAMES)
    if foreign:
        raise BertKerasError(f"{folder}: a bert-keras checkpoint folder that also holds {foreign[0]!r}, which "
                             "save_checkpoint did not write; refusing to replace it")


def save_checkpoint(model, folder, vocab_path=None, flavor="bert_keras", lower_case=None, metadata=None):
    """Save ``model`` with its config and vocabulary so `load_checkpoint` reads it back.

    The folder is written as a whole (`bert_keras.utils.atomic_folder`): into a
    temporary sibling that is renamed into place once complete, so a reader
    sees the previous save or the new one, never a mix.  An existing
    non-empty ``folder`` is replaced only when it is a previous bert-keras
    save (``bert_keras.json`` and only the files written here); anything
    else is refused with an error and left untouched.

    Completion marker (bert_keras flavor): ``bert_keras.json`` is written last
    and lists every other file with its size under ``"files"``;
    `load_checkpoint` / `open_checkpoint` refuse a folder whose
    ``bert_keras.json`` has no such list or whose files do not match it.

    Args:
        model: any bert_keras model.
        folder: output folder (created).
        vocab_path: vocab.txt to copy in (default: ``model.vocab_path`` when set).
        flavor: "bert_keras" (bert_keras.json + model.safetensors with our names),
            "huggingface" (config.json + model.safetensors, loadable by
            transformers' BertModel/BertFor*), or "google" (bert_config.json +
            bert_model.ckpt.* in Google's TF1 variable names).  The two
            foreign flavors never replace an existing non-empty folder.
        lower_case: recorded for the tokenizer (default: ``model.lower_case``):
            ``lower_case`` in bert_keras.json, ``do_lower_case`` in Hugging
            Face's tokenizer_config.json and in Google's bert_config.json.
        metadata: extra JSON-serialisable information, e.g. ``{"task": "classification",
            "labels": [...], "max_seq_len": 128}``, read back by `checkpoint_metadata`.
            bert_keras flavor: ``"metadata"`` in bert_keras.json.  huggingface:
            label names become config.json's ``id2label``/``label2id`` (when
            there is one per class), ``max_seq_len`` also becomes
            tokenizer_config.json's ``model_max_length``, and the rest goes
            under config.json's ``bert_keras_metadata``.  google: under
            bert_config.json's ``bert_keras_metadata``.
    """
    if flavor not in ("bert_keras", "huggingface", "google"):
        raise BertKerasError(f"unknown checkpoint flavor {flavor!r}; choose bert_keras, huggingface or google")
    final = os.fspath(folder)
    if flavor == "google":  # before anything is written
        import_tensorflow(f"{final}: writing a Google TF1 checkpoint")
    with atomic_folder(final, may_replace=check_replaceable if flavor == "bert_keras" else None) as tmp:
        _save_into(model, tmp, vocab_path, flavor, lower_case, metadata)
    return folder


def _save_into(model, folder, vocab_path, flavor, lower_case, metadata):
    from bert_keras.models import BertEncoder

    task = task_of(model)
    enc = model if isinstance(model, BertEncoder) else model.encoder
    config = enc.config
    vocab_path = vocab_path or getattr(model, "vocab_path", None)
    if lower_case is None:
        lower_case = getattr(model, "lower_case", None)
    values = {name: np.asarray(var.numpy(), dtype=np.float32) for name, var in model_variables(model).items()}
    entries = encoder_entries(config.num_layers) + head_entries(task)
    _copy_vocab(vocab_path, folder, config)
    if flavor == "bert_keras":
        _write_safetensors(os.path.join(folder, WEIGHTS), values, metadata={"format": "bert_keras"})
        meta = {"format": "bert_keras", "version": FORMAT_VERSION, "task": task, "config": config.to_dict(),
                "head": _head_config(model, task), "lower_case": lower_case, "metadata": metadata or {}}
        # last: the completion marker (see save_checkpoint)
        meta["files"] = {name: os.path.getsize(os.path.join(folder, name)) for name in sorted(os.listdir(folder))}
        write_json(os.path.join(folder, OURS_META), meta)
    elif flavor == "huggingface":
        prefix = "" if task is None else "bert."
        tensors = {}
        for e in entries:
            names = [(prefix if e.encoder else "") + n for n in e.hf]
            tensors.update(zip(names, mapping.from_ours(e, values[e.ours], "hf")))
        if task == "pretraining":
            # transformers ties the decoder to the embeddings but still expects both names.
            tensors["cls.predictions.decoder.weight"] = values["embeddings/token_embedding/embeddings"].copy()
            tensors["cls.predictions.decoder.bias"] = values["masked_lm_head/output_bias"].copy()
        tensors = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
        _write_safetensors(os.path.join(folder, "model.safetensors"), tensors, metadata={"format": "pt"})
        hf = config.to_flavor("huggingface")
        hf["architectures"] = [task_names.HF_ARCHITECTURES[task]]
        rest = dict(metadata or {})
        if task in task_names.CLASS_HEADS:
            n = model.num_classes
            names = [f"LABEL_{i}" for i in range(n)]
            labels = rest.get("labels")
            if isinstance(labels, (list, tuple)) and len(labels) == n and len({str(x) for x in labels}) == n:
                names = [str(x) for x in rest.pop("labels")]  # else they stay under METADATA_KEY
            hf["id2label"] = {str(i): name for i, name in enumerate(names)}
            hf["label2id"] = {name: i for i, name in enumerate(names)}
            if task == "classification" and n == 1:
                hf["problem_type"] = "regression"
        if rest:
            hf[METADATA_KEY] = rest
        write_json(os.path.join(folder, "config.json"), hf)
        if lower_case is not None:
            tokenizer = {"do_lower_case": bool(lower_case), "tokenizer_class": "BertTokenizer"}
            seq_len = rest.get("max_seq_len")
            if isinstance(seq_len, int) and not isinstance(seq_len, bool) and seq_len > 0:
                tokenizer["model_max_length"] = seq_len
            write_json(os.path.join(folder, "tokenizer_config.json"), tokenizer)
    elif flavor == "google":
        tf = import_tensorflow(f"{folder}: writing a Google TF1 checkpoint")
        names, arrays = [], []
        for e in entries:
            names += list(e.google)
            arrays += mapping.from_ours(e, values[e.ours], "google")
        prefix = os.path.join(folder, "bert_model.ckpt")
        tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=[tf.constant(a) for a in arrays])
        google = config.to_flavor("google")
        if lower_case is not None:
            google["do_lower_case"] = bool(lower_case)  # what Google's run_*.py take as --do_lower_case
        if metadata:
            google[METADATA_KEY] = dict(metadata)
        write_json(os.path.join(folder, "bert_config.json"), google)

