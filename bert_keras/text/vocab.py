"""WordPiece vocabulary files: reading them like Google does, and building new ones.

A vocabulary file has one token per line; a token's id is its line number
(0-based).  `load_vocab` follows Google's `tokenization.load_vocab` exactly:
lines are decoded as UTF-8 ignoring invalid bytes and `str.strip()`-ped, blank
lines still take an id, and when a token appears twice the *last* line wins.

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
from typing import Iterable, Sequence

from bert_keras.errors import DataError

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_vocab(path: str | os.PathLike) -> list[str]:
    """Reads a vocabulary file: list of tokens, index = id (Google's rules).

    Raises:
      DataError: the file is missing, unreadable or empty.
    """
    path = os.fspath(path)
    import tensorflow as tf  # GFile reads local paths, gs://, ...

    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
    except (OSError, tf.errors.OpError) as e:
        reason = "no such file" if isinstance(e, (FileNotFoundError, tf.errors.NotFoundError)) else type(e).__name__
        raise DataError(f"cannot read vocabulary file {path!r}: {reason}") from None
    # GFile.readline() cuts after b"\n" only; a final line without newline counts.
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    tokens = [line.decode("utf-8", "ignore").strip() for line in lines]
    if not tokens:
        raise DataError(f"vocabulary file {path!r} is empty")
    return tokens


def token_ids(vocab: Sequence[str]) -> dict[str, int]:
    """token -> id with Google's rule for duplicates (the last line wins)."""
    ids: dict[str, int] = {}
    for i, token in enumerate(vocab):
        ids[token] = i
    return ids


def save_vocab(vocab: Iterable[str], path: str | os.PathLike) -> None:
    """Writes one token per line (UTF-8, '\\n' line ends), atomically (a temporary sibling renamed)."""
    from bert_keras.utils import write_text

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
