"""Small file helpers shared across the package: JSON in with one-line errors, atomic writes."""

from __future__ import annotations

import json
import os
import tempfile

from bert_keras.errors import BertKerasError


def read_json(path, error=BertKerasError):
    """Parse a JSON file; a missing file or bad JSON raises ``error`` naming the file (and line)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise error(f"file not found: {path}") from None
    except json.JSONDecodeError as e:
        raise error(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from None


def atomic_write(path, write):
    """Call ``write(tmp_path)`` on a temporary file in the same folder, then rename it to ``path``.

    Readers never see a half-written file, and a crash leaves the previous version in place.
    """
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_json(path, obj):
    """Write ``obj`` as indented JSON, atomically."""
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
    atomic_write(path, write)
