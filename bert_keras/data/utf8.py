"""Refusing corpora that are not UTF-8 text, before anything is learned from them.

Google's readers decode every line with ``errors="ignore"``: a stray invalid byte is
dropped (and counted, see `PretrainingStats`), which the pipeline keeps.  But a binary
file, a UTF-16 export or a Latin-1 corpus decoded that way is not text with a few bad
bytes; it becomes hundreds of junk tokens or a vocabulary of control codes without a
word.  `check_utf8_text` reads the head of a file and refuses it in one line naming the
file, the line, the column and the byte when it starts with a UTF-16/UTF-32 byte-order
mark, or when more than 1 in 1,000 of its bytes are NUL or not valid UTF-8.
"""

from __future__ import annotations

import codecs
import os

from bert_keras.errors import DataError

SAMPLE_BYTES = 1 << 20
# more bad bytes than this share of the sample: not text (a stray byte in a UTF-8 corpus is far rarer)
BAD_SHARE = 1e-3
_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
         (b"\xfe\xff", "UTF-16"))


def _bad_bytes(data: bytes, final=True):
    """(count, offset of the first) of the bytes of ``data`` that are NUL or not valid UTF-8
    (unless ``final``, a character cut by the end of ``data`` is not counted)."""
    decoder = codecs.getincrementaldecoder("utf-8")("ignore")
    kept = decoder.decode(data, final=final)
    whole = len(data) - len(decoder.getstate()[0])  # the bytes before a cut last character
    invalid = whole - len(kept.encode("utf-8"))
    first = None
    if invalid:
        try:
            data[:whole].decode("utf-8")
        except UnicodeDecodeError as e:
            first = e.start
    nul = data.find(b"\x00")
    if nul >= 0:
        first = nul if first is None else min(first, nul)
    return invalid + data.count(b"\x00"), first


def check_utf8_text(path, what="corpus") -> None:
    """Raise `DataError` when the file at ``path`` is not UTF-8 text (see the module's docstring).

    Paths with a scheme (``gs://``) are read through `tf.io.gfile`.
    """
    path = os.fspath(path)
    if "://" in path:
        import tensorflow as tf

        with tf.io.gfile.GFile(path, "rb") as f:
            head = f.read(SAMPLE_BYTES)
    else:
        with open(path, "rb") as f:
            head = f.read(SAMPLE_BYTES)
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            raise DataError(f"{path}:1: {what} is {encoding} (byte-order mark {bom.hex(' ')}), not UTF-8; "
                            f"convert it first, e.g. iconv -f {encoding} -t UTF-8")
    count, first = _bad_bytes(head, final=len(head) < SAMPLE_BYTES)
    if count and count > BAD_SHARE * len(head):
        line = head.count(b"\n", 0, first) + 1
        column = first - (head.rfind(b"\n", 0, first) + 1) + 1
        raise DataError(f"{path}:{line}: {what} is not UTF-8 text (byte {head[first]:#04x} at column {column}; "
                        f"{count:,} of its first {len(head):,} bytes are NUL or invalid UTF-8); "
                        f"convert it first, e.g. iconv -f LATIN1 -t UTF-8")
