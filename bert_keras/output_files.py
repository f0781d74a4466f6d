"""What a command may replace: its output file, checked in one line before any work.

The writers (`bert_keras.writing`) make every write whole or not at all; this module decides
whether the named output may be written at all.  A command's output file is refused when it
resolves (symbolic links followed) to

* one of the command's inputs (``vocab --input c.txt --out c.txt``),
* a file inside a model, checkpoint or export folder (``best/model.safetensors``,
  ``SM/saved_model.pb``, ``SM/variables/...``): writing there destroys the model, or
  leaves a file that the folder's own writer later refuses to replace,
* an existing file that is not a previous output of the same kind (a vocabulary for
  ``vocab``, JSON records for ``predict``, a metrics object for ``evaluate``).

Devices and pipes (``/dev/stdout``, a FIFO) and URLs are written as they are.
"""

from __future__ import annotations

import json
import os

from bert_keras.errors import BertKerasError

# Files that only a model, checkpoint or export folder holds.
MODEL_FOLDER_FILES = ("saved_model.pb", "model.safetensors", "bert_keras.json", "bert_keras_export.json",
                      "pytorch_model.bin", "tf_model.h5", "bert_config.json", "model_text.tflite", "checkpoint")
_ANCESTORS = 3  # SM/variables/variables.index is two folders down from SM/saved_model.pb
_HEAD_BYTES = 1 << 16


def _head_lines(path):
    """The complete lines in the first 64 KiB of ``path`` (decoded, the newline dropped)."""
    with open(path, "rb") as f:
        head = f.read(_HEAD_BYTES + 1)
    cut = len(head) > _HEAD_BYTES
    lines = head[:_HEAD_BYTES].decode("utf-8").split("\n")
    if cut or not lines[-1]:
        lines.pop()  # a line the sample cut, or the empty rest after the last newline
    return lines


def looks_like_vocabulary(path) -> bool:
    """A WordPiece vocabulary: one token (no spaces) a line, with [PAD], [UNK] or [CLS] early on."""
    try:
        lines = _head_lines(path)
    except (OSError, UnicodeDecodeError):
        return False
    tokens = [line.rstrip("\r") for line in lines[:2000]]
    return (not tokens or (all(t and len(t.split()) == 1 for t in tokens)
                           and bool({"[PAD]", "[UNK]", "[CLS]"} & set(tokens))))


def looks_like_predictions(path) -> bool:
    """`predict`'s output: one JSON object a line."""
    try:
        lines = _head_lines(path)
        return all(isinstance(json.loads(line), dict) for line in lines)
    except (OSError, UnicodeDecodeError, ValueError):
        return False


def _score(value, depth=0) -> bool:
    if isinstance(value, dict):
        return depth < 2 and all(isinstance(k, str) and _score(v, depth + 1) for k, v in value.items())
    return value is None or isinstance(value, (int, float, str))


def looks_like_metrics(path) -> bool:
    """`evaluate`'s output: one JSON object of scores (numbers, null, names, nested once)."""
    try:
        if os.path.getsize(path) > _HEAD_BYTES:
            return False
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if not text.strip():
            return True
        scores = json.loads(text)
        return isinstance(scores, dict) and _score(scores)
    except (OSError, UnicodeDecodeError, ValueError):
        return False


KINDS = {"vocabulary": looks_like_vocabulary, "predictions": looks_like_predictions,
         "metrics": looks_like_metrics}


def model_folder_of(path):
    """The model, checkpoint or export folder that ``path`` lies in (``path`` already resolved), or None."""
    folder = os.path.dirname(path)
    for _ in range(_ANCESTORS):
        for name in MODEL_FOLDER_FILES:
            if os.path.isfile(os.path.join(folder, name)):
                return folder, name
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return None


def check_output_file(path, kind, inputs=()) -> None:
    """Refuse, in one line, an output ``path`` that would replace what is not a previous ``kind`` output.

    Args:
      path: the output file as the user named it (None: stdout, nothing to check).
      kind: a key of `KINDS` ("vocabulary", "predictions", "metrics").
      inputs: ``(option, path)`` pairs of the command's inputs, e.g. ``[("--input", "c.txt")]``;
        a folder input (a model) also refuses every output inside it.

    Raises:
      BertKerasError: naming the output, what it is and what to do.
    """
    if path is None:
        return
    path = os.fspath(path)
    if "://" in path or (os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path))):
        return  # a URL, or a device or pipe: nothing of ours to replace there
    real = os.path.realpath(path)
    for option, given in inputs:
        if given is None:
            continue
        source = os.path.realpath(os.fspath(given))
        if real == source:
            raise BertKerasError(f"{path}: is the input {option} {os.fspath(given)} of this command; "
                                 f"refusing to replace it with the {kind} (choose another output)")
        if os.path.isdir(source) and real.startswith(source.rstrip(os.sep) + os.sep):
            raise BertKerasError(f"{path}: is inside {option} {os.fspath(given)}; refusing to write the "
                                 f"{kind} there (choose an output outside it)")
    inside = model_folder_of(real)
    if inside is not None:
        folder, marker = inside
        raise BertKerasError(f"{path}: is inside the model folder {folder} (it holds {marker}); refusing to "
                             f"write the {kind} there (choose an output outside it)")
    if os.path.isdir(real):
        raise BertKerasError(f"{path}: is a folder; expected a file name")
    if os.path.exists(real) and not KINDS[kind](real):
        raise BertKerasError(f"{path}: exists and is not a previous {kind} file; refusing to replace it "
                             f"(remove it or choose another output)")
