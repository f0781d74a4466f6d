"""Writing outputs safely: one writer per output, whole or not at all, a full disk named.

Every artefact the project writes goes through `atomic_write` (one file) or
`atomic_folder` (a folder of files): it is written to a temporary sibling,
flushed to disk, and renamed into place, so a reader (or TF Serving polling a
version folder) sees either the previous version or the complete new one, and
an interrupted write leaves the previous version untouched.  Files get the
usual permissions (0666 less the umask), not `mkstemp`'s private 0600.

Every command that writes a file or folder holds `single_writer` on it for its
whole run (`bert_keras.locks`): an exclusive lock on a lock file beside it, so a
second writer is refused in one line naming the first one's pid, and temporaries
that a killed writer left beside it are removed.  A full disk is a one-line error naming the
path, what it needed and what was free (`DiskFullError`).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import json
import os
import shutil
import tempfile

from bert_keras.errors import BertKerasError
from bert_keras.locks import device_or_pipe, single_writer


# ------------------------------------------------------------------ a full disk
class DiskFullError(BertKerasError):
    """Writing an output ran out of space: names the output, what it needed and what was free."""


def is_disk_full(error) -> bool:
    """True when ``error`` (or what caused it) is a full disk or quota: an OSError or TensorFlow's message."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(error) or "Disk quota exceeded" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _size_of(path) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(folder, name))
    return total


def disk_full_error(path, written, needs_bytes, error, kept=None) -> DiskFullError:
    """The one-line error for a full disk while writing ``path`` (``written`` bytes were on disk),
    ending with what was ``kept`` (default: the previous version, if any, is unchanged)."""
    kept = kept or "the previous version, if any, is unchanged"
    path = os.fspath(path)
    # a URL's folder is first written into the local temporary folder (`atomic_folder`)
    folder = tempfile.gettempdir() if "://" in path else os.path.dirname(os.path.abspath(path))
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        free = None
    mb = lambda n: f"{n / 1e6:,.1f} MB"  # noqa: E731
    need = max(int(needs_bytes or 0), written)
    needed = (f"it needs about {mb(need)}" if needs_bytes else f"{mb(written)} were written before the disk filled")
    return DiskFullError(f"{path}: no space left on its device ({needed}; {mb(free) if free is not None else '?'} "
                         f"free in {folder}); {kept}")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_path(path) -> None:
    """fsync a file or a folder (a folder's fsync makes a rename inside it durable).

    A file that cannot be flushed is an error (its data may not be on disk);
    a folder that cannot be is not (some file systems refuse fsync on folders).
    """
    folder = os.path.isdir(path)
    try:
        fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if folder else 0))
    except OSError:
        if folder:
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not folder:
            raise
    finally:
        os.close(fd)


def _fsync_tree(root) -> None:
    for folder, _, files in os.walk(root):
        for name in files:
            _fsync_path(os.path.join(folder, name))
        _fsync_path(folder)


def atomic_write(path, write):
    """Call ``write(tmp_path)`` on a temporary file in the same folder, then rename it to ``path``.

    Readers never see a half-written file, and a crash leaves the previous
    version in place.  The file is fsynced before the rename and the folder
    after it; its mode is 0666 less the umask.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise BertKerasError(f"{path}: is a folder; expected a file name")
    if device_or_pipe(path):
        write(path)  # a device or pipe (/dev/stdout, a FIFO): written to, never replaced
        return
    # a link is written through: its target is replaced, the link stays a link
    real = os.path.realpath(path)
    folder = os.path.dirname(real)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(real) + ".tmp-")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        _fsync_path(tmp)
        os.replace(tmp, real)
        _fsync_path(folder)
    except Exception as e:
        if isinstance(e, DiskFullError) or not is_disk_full(e):
            raise
        written = _size_of(tmp) if os.path.exists(tmp) else 0
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise disk_full_error(path, written, None, e) from e
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_text(path, text: str) -> None:
    """Write ``text`` (UTF-8) atomically.

    A URL path (``gs://...``, where a TPU run's model_dir lives) goes through
    `tf.io.gfile`: a temporary sibling renamed over the target.
    """
    if "://" in os.fspath(path):
        _write_text_gfile(os.fspath(path), text)
        return

    def write(tmp):
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    atomic_write(path, write)


def _write_text_gfile(path, text):
    import tensorflow as tf

    tmp = f"{path}.tmp-{os.getpid()}"
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(text)
    tf.io.gfile.rename(tmp, path, overwrite=True)


def write_json(path, obj):
    """Write ``obj`` as indented JSON, atomically."""
    write_text(path, json.dumps(obj, indent=2) + "\n")


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a, b) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0


def replace_folder(tmp, final) -> None:
    """Put the complete folder ``tmp`` in place of ``final`` (which may exist).

    The caller must already have decided that an existing ``final`` may be
    replaced (it is a previous version of the same artefact).  Where the
    kernel can, the two are swapped in one step; elsewhere the old folder is
    first renamed aside, so ``final`` is never half-written, only briefly absent.
    The previous version is deleted only after the new one is in place.
    """
    # a link to a folder: the folder it points to is replaced, never the link itself
    tmp, final = os.fspath(tmp), os.path.realpath(os.fspath(final))
    _fsync_tree(tmp)
    parent = os.path.dirname(final)
    if not os.path.lexists(final):
        os.replace(tmp, final)
    elif _exchange(tmp, final):
        shutil.rmtree(tmp)  # now holds the previous version
    else:
        old = tempfile.mkdtemp(prefix="." + os.path.basename(final) + ".old-", dir=parent)
        os.rmdir(old)
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    _fsync_path(parent)


def folder_entries(folder) -> list:
    """The names in ``folder``, a local path or a URL (``gs://``, through `tf.io.gfile`)."""
    folder = os.fspath(folder)
    if "://" in folder:
        import tensorflow as tf

        return [e.rstrip("/") for e in tf.io.gfile.listdir(folder)]
    return os.listdir(folder)


def foreign_entries(folder, names=(), patterns=()) -> list:
    """The entries of ``folder`` that are neither in ``names`` nor match a glob of ``patterns`` (sorted).

    `atomic_folder`'s ``may_replace`` callers use it to check that a folder
    holds only what their writer produces before they let it be replaced.
    """
    import fnmatch

    return sorted(e for e in folder_entries(folder)
                  if e not in names and not any(fnmatch.fnmatchcase(e, p) for p in patterns))


@contextlib.contextmanager
def atomic_folder(final, may_replace=None, needs_bytes=None, kept=None, last=None):
    """Write a folder as a whole: ``with atomic_folder(out) as tmp: <write files into tmp>``.

    The body writes into a fresh temporary sibling of ``final``; when it
    finishes without an exception the sibling replaces ``final`` (see
    `replace_folder`); on an exception it is removed and ``final`` is untouched.

    Args:
      final: the folder to produce.
      may_replace: called with ``final`` when it already exists and is not
        empty; it returns normally when the existing folder may be replaced
        (it is a previous version of this artefact) and raises otherwise.
        Without it, an existing non-empty ``final`` is an error: nothing is
        deleted that this call did not write.
      needs_bytes: about how much the folder takes, for the message when the
        disk fills (`DiskFullError`, naming ``final``).
      kept: what a full disk leaves, in words, for that message (default: the
        previous version, if any, is unchanged).
      last: a URL ``final`` (``gs://``, where no folder can be renamed into
        place): the name of the file that says the folder is complete.  The
        body writes into a local temporary folder; its files are then copied
        up through `tf.io.gfile`, the previous version removed first and
        ``last`` copied last, so a reader sees no folder or a complete one.

    The call holds `single_writer` on a local ``final`` throughout.
    """
    final = os.fspath(final)
    remote = "://" in final
    written = 0
    with contextlib.nullcontext() if remote else single_writer(final):
        try:
            with _remote_folder(final, may_replace, last) if remote else _folder_in_place(final, may_replace) as tmp:
                try:
                    yield tmp
                    written = _size_of(tmp)
                except Exception:
                    written = _size_of(tmp)
                    raise
        except Exception as e:  # the temporary is gone: what is free now is what the user has
            if not is_disk_full(e):
                raise
            raise disk_full_error(final, written, needs_bytes, e, kept=kept) from e


@contextlib.contextmanager
def _folder_in_place(final, may_replace):
    if os.path.isdir(final):
        real, cwd = os.path.realpath(final), os.path.realpath(os.getcwd())
        if cwd == real or cwd.startswith(real.rstrip(os.sep) + os.sep):
            # swapping it would leave this process (and the user's shell) in a deleted folder
            raise BertKerasError(f"{final}: is (or contains) the working directory; write to a subfolder")
    if os.path.isdir(final) and os.listdir(final):
        if may_replace is None:
            raise BertKerasError(f"{final}: folder exists and is not empty; refusing to replace it")
        may_replace(final)
    elif os.path.exists(final) and not os.path.isdir(final):  # a dangling link: its target is made
        raise BertKerasError(f"{final}: exists and is not a folder")
    real = os.path.realpath(final)  # a link is written through to the folder it points to
    parent = os.path.dirname(real)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(real) + ".tmp-", dir=parent)
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        replace_folder(tmp, real)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _remote_folder(final, may_replace, last):
    import tensorflow as tf

    gfile = tf.io.gfile
    if gfile.isdir(final) and gfile.listdir(final):
        if may_replace is None:
            raise BertKerasError(f"{final}: folder exists and is not empty; refusing to replace it")
        may_replace(final)
    elif gfile.exists(final) and not gfile.isdir(final):
        raise BertKerasError(f"{final}: exists and is not a folder")
    tmp = tempfile.mkdtemp(prefix=".bert_keras-upload-")
    try:
        yield tmp
        files = [os.path.relpath(os.path.join(root, name), tmp) for root, _, names in os.walk(tmp) for name in names]
        if gfile.exists(final):
            gfile.rmtree(final)  # the completion marker goes with it: a reader meanwhile sees no folder
        for name in sorted(files, key=lambda n: (n == last, n)):
            target = final.rstrip("/") + "/" + name.replace(os.sep, "/")
            gfile.makedirs(target.rsplit("/", 1)[0])
            gfile.copy(os.path.join(tmp, name), target, overwrite=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
