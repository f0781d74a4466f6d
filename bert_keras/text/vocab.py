"""WordPiece vocabulary files: reading them like Google does, and building new ones.

A vocabulary file has one token per line; a token's id is its line number
(0-based).  `load_vocab` follows Google's `tokenization.load_vocab` for the
ids: lines are `str.strip()`-ped, blank lines still take an id, and when a token
appears twice the *last* line wins (Google fills an `OrderedDict`, so the later
index overwrites the earlier one; `BertTokenizer`, the core-ops WordPiece and
the TFLite tables use the same rule).  A repeated token is worth knowing about,
since its first id can never come out of the tokenizer: the first time a file is
read in a process, one warning line on stderr names the file, the token, both
line numbers and the id used.

A file is checked before any of it is used, each problem a one-line
`DataError` naming the file and the line:

* more than `MAX_VOCAB_SIZE` (4,194,304) lines, tensorflow-text's WordPiece
  limit: counted while reading, so a huge file fails after reading that many
  lines, not after loading it all;
* bytes that are not UTF-8 (Google drops them silently; a real vocabulary has
  none, a binary file has many);
* control bytes (NUL, ESC, DEL, ...; TAB and CR are allowed: they are
  whitespace, stripped like Google does).

`build_vocab` learns a new vocabulary from raw text with tensorflow-text's
WordPiece learner (the algorithm behind `bert_vocab_from_dataset`), after the
same basic tokenization `BertTokenizer` applies, so every word the learner sees
is a word the tokenizer will later look up.  The reserved tokens come first, in
this order: ``[PAD]`` = 0, ``[UNK]`` = 1, ``[CLS]`` = 2, ``[SEP]`` = 3,
``[MASK]`` = 4 (Google's released English vocabularies use 0, 100, 101, 102,
103 instead; `BertTokenizer` always reads ids from the file, never assumes
them).
"""

from __future__ import annotations

import collections
import os
import re
import sys
from typing import Iterable, Sequence

from bert_keras.errors import DataError

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


# tensorflow-text's FastWordpieceTokenizer refuses more ("Vocab size exceeds the max supported").
MAX_VOCAB_SIZE = 4_194_304
_CHUNK = 1 << 20
# C0 control bytes and DEL, except TAB, LF and CR (whitespace that str.strip() handles like Google)
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_WARNED: set = set()  # files whose repeated tokens were reported in this process


def _open(path):
    if "://" in path:  # gs://, hdfs://, ...: TensorFlow's file systems
        import tensorflow as tf

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def _read_bytes(path: str) -> bytes:
    """The file's bytes; more than MAX_VOCAB_SIZE lines fails as soon as they are read."""
    chunks, newlines = [], 0
    try:
        with _open(path) as f:
            while True:
                chunk = f.read(_CHUNK)
                if not chunk:
                    break
                chunks.append(chunk)
                newlines += chunk.count(b"\n")
                if newlines > MAX_VOCAB_SIZE:
                    raise DataError(f"{path}: at least {newlines:,} lines, more than the {MAX_VOCAB_SIZE:,} "
                                    f"tokens a vocabulary can hold (tensorflow-text's WordPiece limit)")
    except DataError:
        raise
    except Exception as e:  # noqa: BLE001 - OSError, or TensorFlow's errors for remote paths
        missing = isinstance(e, FileNotFoundError) or type(e).__name__ == "NotFoundError"
        raise DataError(f"cannot read vocabulary file {path!r}: "
                        f"{'no such file' if missing else type(e).__name__}") from None
    data = b"".join(chunks)
    lines = newlines + (1 if data and not data.endswith(b"\n") else 0)
    if lines > MAX_VOCAB_SIZE:
        raise DataError(f"{path}: {lines:,} lines, more than the {MAX_VOCAB_SIZE:,} tokens a vocabulary "
                        f"can hold (tensorflow-text's WordPiece limit)")
    return data


def _where(data: bytes, pos: int):
    """(line, column), both 1-based, of byte offset `pos`."""
    line_start = data.rfind(b"\n", 0, pos) + 1
    return data.count(b"\n", 0, pos) + 1, pos - line_start + 1


def _check_bytes(path: str, data: bytes) -> str:
    """The file decoded; DataError naming the line and byte of the first invalid UTF-8 or control byte."""
    control = _CONTROL.search(data)
    try:
        text = data.decode("utf-8")
        bad = None
    except UnicodeDecodeError as e:
        bad = e.start
    if control is not None and (bad is None or control.start() < bad):
        line, column = _where(data, control.start())
        raise DataError(f"{path}:{line}: control byte {data[control.start()]:#04x} at column {column}: "
                        f"a vocabulary is UTF-8 text, one token a line")
    if bad is not None:
        line, column = _where(data, bad)
        raise DataError(f"{path}:{line}: not valid UTF-8 (byte {data[bad]:#04x} at column {column}): "
                        f"a vocabulary is UTF-8 text, one token a line")
    return text


def repeated_tokens(vocab: Sequence[str]) -> list[tuple[str, int, int]]:
    """(token, first id, later id) for every non-empty token on more than one line, in file order.

    Google's rule (and ours) gives such a token its last id; the earlier ids
    are never produced.  Blank lines (the token "") are left out: nothing
    tokenizes to them either way.
    """
    first: dict[str, int] = {}
    repeats = []
    for i, token in enumerate(vocab):
        if not token:
            continue
        if token in first:
            repeats.append((token, first[token], i))
        else:
            first[token] = i
    return repeats


def _warn_repeats(path: str, vocab: Sequence[str]) -> None:
    key = path if "://" in path else os.path.abspath(path)
    if key in _WARNED:
        return
    _WARNED.add(key)
    repeats = repeated_tokens(vocab)
    if not repeats:
        return
    token, first, later = repeats[0]
    last = max(i for t, _, i in repeats if t == token)
    more = len({t for t, _, _ in repeats}) - 1
    print(f"warning: {path}:{later + 1}: token {token!r} is also on line {first + 1}; id {last} (its last line's) "
          f"is used, as Google's load_vocab does, so id {first} is never produced"
          + (f"; {more} more repeated token{'s' if more > 1 else ''} in this file" if more else ""),
          file=sys.stderr, flush=True)


def load_vocab(path: str | os.PathLike) -> list[str]:
    """Reads a vocabulary file: list of tokens, index = id (Google's rules).

    The file is checked first (see the module docstring); a token on several
    lines is reported once per file and process on stderr.

    Raises:
      DataError: the file is missing, unreadable, empty, has more than
        MAX_VOCAB_SIZE lines, invalid UTF-8 or control bytes (file and line named).
    """
    path = os.fspath(path)
    text = _check_bytes(path, _read_bytes(path))
    # Google's readline() cuts after "\n" only; a final line without newline counts.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    tokens = [line.strip() for line in lines]
    if not tokens:
        raise DataError(f"vocabulary file {path!r} is empty")
    _warn_repeats(path, tokens)
    return tokens


def token_ids(vocab: Sequence[str]) -> dict[str, int]:
    """token -> id with Google's rule for duplicates (the last line wins)."""
    ids: dict[str, int] = {}
    for i, token in enumerate(vocab):
        ids[token] = i
    return ids


def save_vocab(vocab: Iterable[str], path: str | os.PathLike) -> None:
    """Writes one token per line (UTF-8, '\\n' line ends), atomically (a temporary sibling renamed)."""
    from bert_keras.writing import write_text

    write_text(path, "".join(token + "\n" for token in vocab))


def count_words(lines: Iterable[str | bytes], lower_case: bool = True, batch_size: int = 1024) -> collections.Counter:
    """Counts the basic-tokenizer words (as `BertTokenizer` splits them) of text lines."""
    import tensorflow as tf

    from bert_keras.text.basic import BasicTokenizer

    basic = BasicTokenizer(lower_case=lower_case)
    words_fn = tf.function(basic.words, input_signature=[tf.TensorSpec([None], tf.string)])
    counts: collections.Counter = collections.Counter()
    batch: list = []

    def flush():
        if batch:
            flat = words_fn(tf.constant(batch)).flat_values.numpy()
            counts.update(w.decode("utf-8") for w in flat)
            batch.clear()

    for line in lines:
        batch.append(line.encode("utf-8") if isinstance(line, str) else line)
        if len(batch) >= batch_size:
            flush()
    flush()
    return counts


def build_vocab(
    lines: Iterable[str | bytes],
    vocab_size: int = 30522,
    lower_case: bool = True,
    reserved_tokens: Sequence[str] = RESERVED_TOKENS,
    min_count: int = 2,
    max_token_length: int = 50,
    max_unique_chars: int = 1000,
    word_counts: collections.Counter | None = None,
) -> list[str]:
    """Learns a WordPiece vocabulary (list of tokens) from text lines.

    Args:
      lines: the corpus, one text per item (str or UTF-8 bytes).
      vocab_size: target size; the learner may return somewhat fewer tokens
        (it searches a count threshold giving a size within 5% of this).
      lower_case: basic tokenization for uncased (True) or cased models.
      reserved_tokens: placed first, in this order.
      min_count: words seen fewer times are ignored by the learner.
      max_token_length, max_unique_chars: passed to the learner.
      word_counts: precomputed `count_words` result (then `lines` is ignored).
    """
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    counts = word_counts if word_counts is not None else count_words(lines, lower_case)
    if not counts:
        raise DataError("no words found in the corpus: cannot build a vocabulary")
    vocab = learner.learn(
        list(counts.items()),
        vocab_size=vocab_size,
        reserved_tokens=list(reserved_tokens),
        upper_thresh=max(counts.values()) + 1,
        lower_thresh=min_count,
        max_token_length=max_token_length,
        max_unique_chars=max_unique_chars,
    )
    return list(vocab)
