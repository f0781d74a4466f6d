"""One writer per output: `single_writer` (an exclusive lock beside the output, per real path)
and the `writes` decorator.

Every command that writes a file or folder holds `single_writer` on it for its whole run: a
second writer is refused in one line naming the first one's pid, command and start time, and
the temporaries a killed writer left beside the output are removed once the lock is held.
`bert_keras.writing` writes the outputs themselves (whole or not at all).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import inspect
import json
import os
import shutil
import sys
import threading
import time

from bert_keras.errors import BertKerasError


# ------------------------------------------------------------------ one writer per output
# Lock files held by this process: real path of the output -> [open file, depth].  A writer
# may nest (an export's folder is also locked by the `atomic_folder` inside it).
_HELD = {}
_HELD_GUARD = threading.Lock()
# What our writers leave beside an output when they are killed: `atomic_folder`'s and
# `atomic_write`'s temporaries, and a folder `replace_folder` had moved aside.
_TEMPORARY_SIBLINGS = (".tmp-", ".old-")


def lock_file_of(path) -> str:
    """The lock file `single_writer` holds for ``path``: ``.NAME.lock`` beside what ``path`` resolves to.

    Symbolic links are resolved first, so every spelling of one output (a link, ``../x``,
    the real path) shares one lock.
    """
    path = os.path.realpath(os.fspath(path)).rstrip(os.sep) or os.sep
    return os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".lock")


def _open_lock_file(path, lock_path):
    """The lock file, opened for writing without following a link, and only if it is a plain file.

    A lock file that is a link (or a hard link to another file, or a FIFO or device) is how
    someone who can write the folder would aim our truncate-and-write at a file of theirs
    choosing: such a path is refused, never written.
    """
    import stat

    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        os.makedirs(os.path.dirname(lock_path), exist_ok=True)
        fd = os.open(lock_path, flags, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BertKerasError(f"{path}: its lock file {lock_path} is a symbolic link; refusing to follow it "
                                 "(remove it if no bert-keras writer is running)") from None
        raise BertKerasError(f"{path}: cannot create its lock file {lock_path} ({e.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        os.close(fd)
        what = "a hard link to another file" if stat.S_ISREG(info.st_mode) else "not a plain file"
        raise BertKerasError(f"{path}: its lock file {lock_path} is {what}; refusing to write it "
                             "(remove it if no bert-keras writer is running)")
    return os.fdopen(fd, "r+", encoding="utf-8")


def _holder(lock_path) -> str:
    """Who holds ``lock_path``, as its lock file says ("pid 123, `bert-keras export ...`, since 12:00:01")."""
    try:
        with open(lock_path, encoding="utf-8", errors="replace") as f:
            info = json.loads(f.read() or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "another process"
    since = time.strftime("%H:%M:%S", time.localtime(info["since"])) if "since" in info else "?"
    return f"pid {info['pid']}, `{info.get('command', '?')}`, since {since}"


def _remove_stale_temporaries(path) -> list:
    """Removes the temporaries a killed writer of ``path`` left beside it; returns their names.

    Only called while holding ``path``'s lock: no live writer of ours is using them.
    """
    folder, name = os.path.split(os.path.realpath(os.fspath(path)))
    removed = []
    try:
        entries = os.listdir(folder)
    except OSError:
        return removed
    for entry in entries:
        if not any(entry.startswith("." + name + marker) for marker in _TEMPORARY_SIBLINGS):
            continue
        stale = os.path.join(folder, entry)
        if os.path.isdir(stale) and not os.path.islink(stale):
            shutil.rmtree(stale, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(stale)
        removed.append(entry)
    return removed


def device_or_pipe(path) -> bool:
    """Whether ``path`` exists and is neither a regular file nor a folder: a device or pipe
    (/dev/stdout, a FIFO), written to in place, never replaced or locked."""
    return os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path))


@contextlib.contextmanager
def single_writer(path):
    """Hold the exclusive right to write ``path`` (a file or folder) while the block runs.

    An exclusive `fcntl.flock` on ``.NAME.lock`` beside ``path`` (the lock file records
    the holder's pid and command line), held by one process at a time: a second writer,
    here or in another process, gets a one-line `BertKerasError` naming the holder.
    The lock is released when the block ends or the process dies (the kernel drops
    it, even on kill -9); the lock file is removed on release.  Once the lock is held,
    temporaries a killed writer of ``path`` left beside it are removed.  Nested use on
    the same path in one process is allowed.  URLs (``gs://``) are not locked.
    """
    path = os.fspath(path)
    if "://" in path or device_or_pipe(path):
        yield  # a URL, or a device or pipe (e.g. /dev/stdout): nothing of ours to replace there
        return
    import fcntl

    key = os.path.realpath(path)
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None:
            held[1] += 1
    if held is not None:
        try:
            yield
        finally:
            with _HELD_GUARD:
                held[1] -= 1
        return
    lock_path = lock_file_of(path)
    while True:
        f = _open_lock_file(path, lock_path)
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise BertKerasError(f"{path}: another bert-keras writer is writing it ({_holder(lock_path)}); "
                                 "wait for it to finish or choose another output") from None
        # the previous holder removes the file before unlocking: ours must still be the one there
        try:
            same = os.path.samestat(os.fstat(f.fileno()), os.lstat(lock_path))
        except FileNotFoundError:
            same = False
        if same:
            break
        f.close()
    f.seek(0)
    f.truncate()
    f.write(json.dumps({"pid": os.getpid(), "command": " ".join(["bert-keras"] + sys.argv[1:])
                        if os.path.basename(sys.argv[0] or "").startswith("bert-keras") else " ".join(sys.argv),
                        "since": int(time.time())}))
    f.flush()
    with _HELD_GUARD:
        _HELD[key] = [f, 1]
    try:
        _remove_stale_temporaries(path)
        yield
    finally:
        with _HELD_GUARD:
            del _HELD[key]
        with contextlib.suppress(OSError):
            os.remove(lock_path)
        f.close()  # closing the last descriptor releases the lock


def writes(parameter):
    """Decorator: the call holds `single_writer` on its argument ``parameter`` (a path) throughout.

    An in-memory model or None passed there is not locked.
    """
    def decorate(fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            path = signature.bind(*args, **kwargs).arguments.get(parameter)
            lock = single_writer(path) if isinstance(path, (str, os.PathLike)) else contextlib.nullcontext()
            with lock:
                return fn(*args, **kwargs)
        return wrapper
    return decorate
