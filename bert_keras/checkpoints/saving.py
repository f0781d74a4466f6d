"""`save_checkpoint`: a model, its config and vocabulary as a bert-keras, Hugging Face or
Google TF1 folder, written as a whole."""

from __future__ import annotations

import os
import shutil

import numpy as np

from bert_keras import task_names
from bert_keras.checkpoints import mapping
from bert_keras.checkpoints.formats import FORMAT_VERSION, METADATA_KEY, OURS_META, VOCAB, WEIGHTS
from bert_keras.checkpoints.mapping import encoder_entries, head_entries, model_variables, task_of
from bert_keras.errors import BertKerasError
from bert_keras.utils import import_tensorflow
from bert_keras.writing import atomic_folder, atomic_write, folder_entries, foreign_entries, write_json


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
    if OURS_META not in folder_entries(folder):
        raise BertKerasError(f"{folder}: folder exists, is not empty and is not a bert-keras checkpoint; "
                             "refusing to replace it (choose another folder)")
    foreign = foreign_entries(folder, _SAVED_NAMES)
    if foreign:
        raise BertKerasError(f"{folder}: a bert-keras checkpoint folder that also holds {foreign[0]!r}, which "
                             "save_checkpoint did not write; refusing to replace it")


def save_checkpoint(model, folder, vocab_path=None, flavor="bert_keras", lower_case=None, metadata=None):
    """Save ``model`` with its config and vocabulary so `load_checkpoint` reads it back.

    The folder is written as a whole (`bert_keras.writing.atomic_folder`): into a
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
        folder: output folder (created); a URL (``gs://``) is written through `tf.io.gfile`,
            the completion marker last.
        vocab_path: vocab.txt to copy in (default: ``model.vocab_path`` when set).
        flavor: "bert_keras" (bert_keras.json + model.safetensors with our names),
            "huggingface" (config.json + model.safetensors, loadable by
            transformers' BertModel/BertFor*), or "google" (bert_config.json +
            bert_model.ckpt.* in Google's TF1 variable names), or "keras_hub" (a
            keras-hub preset, written through keras-hub, which must be installed:
            ``BertBackbone``, or ``BertTextClassifier`` for a classification
            model).  The foreign flavors never replace an existing non-empty folder.
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
    if flavor not in ("bert_keras", "huggingface", "google", "keras_hub"):
        raise BertKerasError(f"unknown checkpoint flavor {flavor!r}; choose bert_keras, huggingface, google "
                             "or keras_hub")
    final = os.fspath(folder)
    if flavor == "google":  # before anything is written
        import_tensorflow(f"{final}: writing a Google TF1 checkpoint")
    ours = flavor == "bert_keras"
    with atomic_folder(final, may_replace=check_replaceable if ours else None, last=OURS_META if ours else None) as tmp:
        if flavor == "keras_hub":
            from bert_keras.checkpoints.keras_hub import save_preset

            def save_hf(m, hf, vocab, casing):
                os.makedirs(hf)
                _save_into(m, hf, vocab, "huggingface", casing, None)

            save_preset(model, tmp, vocab_path or getattr(model, "vocab_path", None),
                        getattr(model, "lower_case", None) if lower_case is None else lower_case, metadata, save_hf,
                        name=final)
        else:
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
