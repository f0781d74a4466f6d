"""Load and save BERT checkpoints: Hugging Face, Google TF1, keras-hub presets and bert-keras folders.

    model = load_checkpoint("path/to/folder", task="classification", num_classes=2)
    save_checkpoint(model, "out/")                     # bert-keras layout
    save_checkpoint(model, "hf/", flavor="huggingface")  # config.json + model.safetensors + vocab.txt
    save_checkpoint(model, "g/", flavor="google")      # bert_config.json + bert_model.ckpt.*
    save_checkpoint(model, "kh/", flavor="keras_hub")  # a keras-hub preset (needs keras-hub)
"""

from __future__ import annotations

import os
import re
import warnings

import numpy as np

from bert_keras.checkpoints import mapping
from bert_keras.checkpoints.formats import METADATA_KEY, OURS_META, check_vocab, open_checkpoint
from bert_keras import task_names
from bert_keras.checkpoints.mapping import encoder_entries, head_entries, model_variables, task_of
from bert_keras.checkpoints.saving import check_replaceable, save_checkpoint
from bert_keras.task_names import MODEL_TASKS as TASKS  # noqa: F401 - bert_keras.checkpoints.TASKS
from bert_keras.errors import BertKerasError, CheckpointError

__all__ = ["load_checkpoint", "save_checkpoint", "model_variables", "task_of", "open_checkpoint",
           "checkpoint_task", "checkpoint_metadata", "recorded_casing", "check_replaceable",
           "is_complete_checkpoint", "names_in_checkpoint", "assign_variables", "METADATA_KEY", "TASKS"]

_DEFAULT_HF_LABEL = re.compile(r"LABEL_(\d+)")


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
    if _mlm_only(raw):
        return "pretraining"
    for task in ("pretraining", "span", "classification"):
        if _has_head(raw, task):
            return task
    return None


def names_in_checkpoint(raw, entry):
    """The names ``entry`` of the name table has in ``raw``'s flavour (ours, Hugging Face's, Google's)."""
    if raw.flavor == "bert_keras":
        return [entry.ours]
    if raw.flavor == "hf":
        prefix = raw.prefix if entry.encoder else ""
        return [prefix + n for n in entry.hf]
    return list(entry.google)


def _checkpoint_num_classes(raw, task):
    """The head size stored in the checkpoint for a classification-style task, if any."""
    entry = head_entries(task)[0]
    name = names_in_checkpoint(raw, entry)[0]
    if name not in raw:
        return None
    shape = raw.shape(name)
    return shape[-1] if raw.flavor == "bert_keras" else shape[0]


def _has_head(raw, task):
    entries = head_entries(task)
    present = [all(n in raw for n in names_in_checkpoint(raw, e)) for e in entries]
    if task == "pretraining" and _mlm_only(raw):
        return False  # its masked-LM head is loaded by itself (`load_checkpoint`)
    if any(present) and not all(present):
        missing = [names_in_checkpoint(raw, e)[0] for e, p in zip(entries, present) if not p]
        raise CheckpointError(f"{raw.source}: incomplete {task} head, missing variable {missing[0]!r}")
    return bool(entries) and all(present)


def _mlm_entries():
    return [e for e in head_entries("pretraining") if e.ours.startswith("masked_lm_head/")]


def _mlm_only(raw):
    """A masked-LM head without a next-sentence head beside it (keras-hub, Model Garden)."""
    def has(entries):
        return [all(n in raw for n in names_in_checkpoint(raw, e)) for e in entries]

    nsp = [e for e in head_entries("pretraining") if e not in _mlm_entries()]
    return all(has(_mlm_entries())) and not any(has(nsp))


def assign_variables(raw, entries, variables):
    """Assigns each entry's value in ``raw`` to ``variables[entry.ours]`` (transposed, split or joined
    as the flavour stores it)."""
    flavor = "hf" if raw.flavor == "hf" else "google"
    for entry in entries:
        var = variables[entry.ours]
        names = names_in_checkpoint(raw, entry)
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
            `save_checkpoint`, a keras-hub preset (``BertBackbone``; a
            ``BertTextClassifier``'s head too), or a TF Model Garden TF2
            checkpoint of ``BertEncoder`` (its folder or prefix; the masked-LM
            head of ``BertPretrainerV2`` too).
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
        elif task == "pretraining" and _mlm_only(raw):
            load_head = "mlm"
            warnings.warn(f"{raw.source}: a masked-LM head without a next-sentence head: the MLM head is "
                          "loaded, the NSP head is new", stacklevel=2)
        elif task == "pretraining" and not load_head:
            warnings.warn(f"{raw.source}: no MLM/NSP heads in the checkpoint: new heads are initialised "
                          "(the MLM projection stays tied to the loaded embeddings)", stacklevel=2)
        elif task in task_names.CLASS_HEADS and "num_classes" not in head_kwargs:
            raise BertKerasError(f"{raw.source} has no {task} head: pass num_classes")
    model = _build_model(config, task, head_kwargs, dtype)
    variables = model_variables(model)
    heads = _mlm_entries() if load_head == "mlm" else head_entries(task) if load_head else []
    entries = encoder_entries(config.num_layers) + heads
    assign_variables(raw, entries, variables)
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
