"""Checkpoints at a URL (``gs://``, or any file system TensorFlow's ``tf.io.gfile`` reads).

`save_checkpoint` writes to a URL (a local temporary folder copied up, the completion marker
last); `load_checkpoint` and `open_checkpoint` read one from a local copy: the folder's files
(or a Google checkpoint prefix's files and the ``bert_config.json``/``vocab.txt`` beside it)
copied, as a whole, into ``<cache>/remote-checkpoints/<hash of the URL>/``, where ``<cache>`` is
`$BERT_KERAS_CACHE` or ``~/.cache/bert_keras/samples``.  The copy records each file's size and
modification time at the URL (``.remote.json``) and is made again whenever one of them, or
the list of files, differs, or the file system keeps no modification times: it is never older
than the URL's checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os

from bert_keras.errors import CheckpointError
from bert_keras.utils import import_tensorflow
from bert_keras.writing import atomic_folder

BESIDE_A_PREFIX = ("bert_config.json", "vocab.txt", "checkpoint")
RECORD = ".remote.json"


def cache_folder(url):
    from bert_keras.samples.registry import default_cache_dir

    return os.path.join(default_cache_dir(), "remote-checkpoints",
                        hashlib.sha256(url.encode("utf-8")).hexdigest()[:20])


def local_copy(url) -> str:
    """The local path to open for the checkpoint at ``url``: a copy of its folder, or of a Google
    prefix's files (the path then names the prefix in the copy)."""
    url = os.fspath(url).rstrip("/")
    gfile = import_tensorflow(f"{url}: reading a checkpoint from a URL").io.gfile
    prefix = None
    if gfile.exists(url + ".index"):  # a Google checkpoint prefix (some file systems call it a folder too)
        parent, prefix = url.rsplit("/", 1)
        files = [(parent, n) for n in gfile.listdir(parent)
                 if n.startswith(prefix + ".") or n in BESIDE_A_PREFIX]
        url = parent
    elif gfile.isdir(url):
        files = [(root, name) for root, _, names in gfile.walk(url) for name in names]
    else:
        raise CheckpointError(f"checkpoint not found: {url}")
    folder = cache_folder(url)
    # each file once: where it is at the URL, and its path inside the copy
    sources = {(root.rstrip("/")[len(url):].lstrip("/") + "/" + name).lstrip("/"): root.rstrip("/") + "/" + name
               for root, name in files}
    stats = {"url": url, "files": {}}
    for relative, source in sources.items():
        stat = gfile.stat(source)
        stats["files"][relative] = [stat.length, stat.mtime_nsec]
    # a file system without modification times (0) cannot say that a file changed: copy again
    if all(mtime for _, mtime in stats["files"].values()) and _recorded(folder) == stats:
        return os.path.join(folder, prefix) if prefix else folder
    with atomic_folder(folder, may_replace=lambda _: None) as tmp:
        with open(os.path.join(tmp, RECORD), "w", encoding="utf-8") as f:
            json.dump(stats, f)
        for relative, source in sources.items():
            target = os.path.join(tmp, *relative.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            gfile.copy(source, target, overwrite=True)
    return os.path.join(folder, prefix) if prefix else folder


def _recorded(folder):
    try:
        with open(os.path.join(folder, RECORD), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
