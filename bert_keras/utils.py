"""Small utilities shared across the package: JSON in with one-line errors and
`import_tensorflow` (TensorFlow or a one-line error saying what needs it).

The safe writers (`atomic_write`, `atomic_folder`, `single_writer`, `write_json`, ...)
live in `bert_keras.writing` and are importable from here as well.
"""

from __future__ import annotations

import json

from bert_keras.errors import BertKerasError
from bert_keras.locks import lock_file_of, single_writer, writes
from bert_keras.writing import (
    DiskFullError, atomic_folder, atomic_write, foreign_entries, replace_folder, write_json, write_text)

__all__ = ["import_tensorflow", "read_json", "DiskFullError", "atomic_folder", "atomic_write",
           "foreign_entries", "lock_file_of", "replace_folder", "single_writer", "write_json",
           "write_text", "writes"]


def import_tensorflow(purpose):
    """The `tensorflow` module, or a one-line `BertKerasError` saying that ``purpose`` needs it.

    The models, their training on JAX or torch, and the bert_keras and Hugging Face checkpoint
    layouts need no TensorFlow; the text pipeline, the exports and Google's TF1 checkpoint
    layout do.
    """
    try:
        import tensorflow as tf
    except ImportError as e:
        raise BertKerasError(f"{purpose} needs TensorFlow, which cannot be imported here ({e}); "
                             "pip install 'tensorflow>=2.20,<2.22', or use the bert_keras or "
                             "huggingface checkpoint layout") from None
    return tf


def read_json(path, error=BertKerasError):
    """Parse a JSON file; a missing file or bad JSON raises ``error`` naming the file (and line)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise error(f"file not found: {path}") from None
    except json.JSONDecodeError as e:
        raise error(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from None
