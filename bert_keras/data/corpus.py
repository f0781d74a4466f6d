"""Reading Google-format pre-training text into WordPiece ids.

The format of Google's `create_pretraining_data.py`: plain UTF-8 text, one
sentence per line, a blank line between documents.  A `Corpus` holds a
file set's ids in one flat int32 array with sentence and document offsets, so
that any run of consecutive sentences of a document is one contiguous slice
(which makes the pair construction in `pairs.py` index arithmetic).

Tokenization runs as TensorFlow ops inside a `tf.data` pipeline (lines are
read with `TextLineDataset`, so local paths and `gs://` both work, and batches
of lines are tokenized in parallel); only the resulting ids come back to
numpy.  Lines are decoded the way Google's `convert_to_unicode` does
(`bytes.decode("utf-8", "ignore")`: invalid bytes are dropped) and a line that
is empty after stripping whitespace ends a document; each file ends a
document too (Google's script lets the last document of one file run into the
first of the next).  Everything dropped on the way is counted in
`PretrainingStats`, never lost silently.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np
import tensorflow as tf

from bert_keras.errors import DataError
from bert_keras.text.vocab import load_vocab, token_ids

logger = logging.getLogger("bert_keras.data")

# Python's str.strip() (which Google applies) strips every Unicode White_Space
# character; RE2's \s is ASCII only, so the others are listed.
_BLANK_LINE = r"[\s\v\x{1c}-\x{1f}\x{85}\p{Z}]*"
_GLOB_CHARS = set("*?[")


@dataclasses.dataclass
class PretrainingStats:
    """What the pipeline read, dropped and produced (one object per dataset).

    Corpus counts are filled when the text is tokenized (at construction time,
    or when each block is read with `files_per_block`); the example counts
    grow as examples are produced (`epochs` counts completed passes).

    Attributes:
      files: files read.
      lines: lines read.
      blank_lines: lines empty after stripping whitespace (document breaks).
      invalid_utf8_lines: lines holding invalid UTF-8 (those bytes are dropped,
        as Google's `convert_to_unicode` does).
      invalid_utf8_bytes: bytes dropped from those lines.
      lines_without_tokens: non-blank lines that gave no WordPiece at all (e.g.
        only control characters); Google drops them the same way.
      documents: non-empty documents.
      sentences: non-empty sentences (before long ones are split).
      tokens: WordPiece tokens in all sentences.
      long_sentences: sentences longer than `seq_len - 3` tokens, split into
        pieces of at most that length (so a 1 MB line is not cut to one example).
      single_sentence_documents: documents of one sentence (after splitting):
        too short to pair with their own next sentence, they only ever give
        NotNext examples (A = the sentence, B from another document).
      examples: examples produced so far.
      not_next_examples: of those, examples whose B is random (label 1).
      truncated_tokens: tokens removed by longest-first pair truncation.
      epochs: completed passes over the corpus.
    """

    files: int = 0
    lines: int = 0
    blank_lines: int = 0
    invalid_utf8_lines: int = 0
    invalid_utf8_bytes: int = 0
    lines_without_tokens: int = 0
    documents: int = 0
    sentences: int = 0
    tokens: int = 0
    long_sentences: int = 0
    single_sentence_documents: int = 0
    examples: int = 0
    not_next_examples: int = 0
    truncated_tokens: int = 0
    epochs: int = 0

    def summary(self):
        """One line of the counts, for logs."""
        return ", ".join(f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self))


@dataclasses.dataclass
class Corpus:
    """Token ids of a set of documents.

    Attributes:
      ids: int32 [T], all tokens, sentence after sentence.
      sentence_offsets: int64 [S + 1]; sentence s is ids[offsets[s]:offsets[s+1]].
      document_offsets: int64 [D + 1]; document d is sentences
        document_offsets[d] .. document_offsets[d+1] - 1.
    """

    ids: np.ndarray
    sentence_offsets: np.ndarray
    document_offsets: np.ndarray

    @property
    def num_documents(self):
        return len(self.document_offsets) - 1

    @property
    def num_sentences(self):
        return len(self.sentence_offsets) - 1

    def split_long_sentences(self, max_len):
        """Splits sentences longer than `max_len` tokens into consecutive pieces.

        The ids stay where they are; only offsets are added.

        Returns:
          (new Corpus, number of sentences that were split).
        """
        lengths = np.diff(self.sentence_offsets)
        long = lengths > max_len
        if not long.any():
            return self, 0
        pieces = np.maximum(1, -(-lengths // max_len))  # ceil
        starts = np.repeat(self.sentence_offsets[:-1], pieces)
        first_piece = np.repeat(np.cumsum(pieces) - pieces, pieces)
        starts = starts + (np.arange(len(starts)) - first_piece) * max_len
        offsets = np.append(starts, self.sentence_offsets[-1]).astype(np.int64)
        piece_offsets = np.concatenate([[0], np.cumsum(pieces)]).astype(np.int64)
        documents = piece_offsets[self.document_offsets]
        return Corpus(self.ids, offsets, documents), int(long.sum())


def resolve_files(files):
    """Expands file names and glob patterns (local or `gs://`), sorted.

    Args:
      files: a string (a path or a glob; several may be joined with commas, as
        Google's `--input_file` allows), a `pathlib.Path`, or a list of them.

    Returns:
      A sorted list of unique file paths (str).

    Raises:
      DataError: a file that does not exist, a directory, or a pattern that
        matches no file (the message names it).
    """
    if isinstance(files, (str, bytes)) or hasattr(files, "__fspath__"):
        files = [files]
    patterns = []
    for f in files:
        f = str(f.decode() if isinstance(f, bytes) else f)
        patterns.extend(p for p in f.split(",") if p)
    if not patterns:
        raise DataError("no pre-training files given")
    found = set()
    for pattern in patterns:
        if _GLOB_CHARS & set(pattern):
            matches = [m for m in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(m)]
            if not matches:
                raise DataError(f"pre-training file pattern matches no files: {pattern}")
            found.update(matches)
        elif not tf.io.gfile.exists(pattern):
            raise DataError(f"pre-training file not found: {pattern}")
        elif tf.io.gfile.isdir(pattern):
            raise DataError(f"pre-training file is a directory (use a glob such as "
                            f"{pattern.rstrip('/')}/*.txt): {pattern}")
        else:
            found.add(pattern)
    return sorted(found)


def read_documents(paths):
    """Google-format files -> list of documents, each a list of stripped non-empty lines.

    A blank line ends a document, and so does the end of each file.  Reads through
    `tf.io.gfile`, so `gs://` paths work.  (Raw text, untokenized: for splitting a corpus or
    for benchmarks; training reads through `load_corpus`.)
    """
    docs = []
    for path in [paths] if isinstance(paths, (str, os.PathLike)) else paths:
        current = []
        with tf.io.gfile.GFile(os.fspath(path), "r") as f:
            for line in f:
                line = line.strip()
                if line:
                    current.append(line)
                elif current:
                    docs.append(current)
                    current = []
        if current:
            docs.append(current)
    return docs


def read_vocab(vocab_path):
    """Reads a WordPiece vocabulary: (tokens by id, token -> id).

    `text.vocab.load_vocab` and `token_ids`, so a token on two lines has the
    id of the last one, as in Google's `load_vocab` and in `BertTokenizer`.

    Raises:
      DataError: missing file, or one of `[CLS] [SEP] [PAD] [MASK]` absent.
    """
    vocab_path = str(vocab_path)
    if not tf.io.gfile.exists(vocab_path):
        raise DataError(f"vocabulary file not found: {vocab_path}")
    vocab = load_vocab(vocab_path)
    index = token_ids(vocab)
    for token in ("[CLS]", "[SEP]", "[PAD]", "[MASK]"):
        if token not in index:
            raise DataError(f"vocabulary file has no {token} token: {vocab_path}")
    return vocab, index


def make_tokenizer(vocab_path, lower_case):
    """The project's in-graph WordPiece tokenizer (identical to Google's)."""
    from bert_keras.text.tokenizer import BertTokenizer

    return BertTokenizer.from_vocab(str(vocab_path), lower_case=lower_case)


def load_corpus(files, tokenizer, stats=None, lines_per_batch=1024):
    """Reads and tokenizes files into one `Corpus`.

    Args:
      files: list of file paths (already resolved).
      tokenizer: an object whose `tokenize(tf.string [N])` returns a
        `tf.RaggedTensor` of int32 ids [N, (pieces)].
      stats: a `PretrainingStats` to add the corpus counts to (optional).
      lines_per_batch: lines tokenized per TF call.

    Returns:
      A `Corpus`.
    """
    stats = stats if stats is not None else PretrainingStats()

    def tokenize(lines):
        # Google: line.decode("utf-8", "ignore").strip(); blank -> new document.
        clean = tf.strings.unicode_transcode(lines, "UTF-8", "UTF-8", errors="ignore")
        dropped = tf.strings.length(lines) - tf.strings.length(clean)
        blank = tf.strings.regex_full_match(clean, _BLANK_LINE)
        pieces = tokenizer.tokenize(clean)
        if pieces.ragged_rank > 1:  # a [N, (words), (pieces)] tokenizer
            pieces = pieces.merge_dims(1, -1)
        return (tf.cast(pieces.flat_values, tf.int32), tf.cast(pieces.row_lengths(), tf.int64),
                blank, dropped)

    all_ids, sentence_lengths, sentence_documents = [], [], []
    document = 0
    for path in files:
        dataset = (tf.data.TextLineDataset(path)
                   .batch(lines_per_batch)
                   .map(tokenize, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
                   .prefetch(tf.data.AUTOTUNE))
        try:
            for ids, lengths, blank, dropped in dataset.as_numpy_iterator():
                # Document number of each line: it grows after every blank line.
                line_document = document + np.cumsum(blank) - blank
                document = int(line_document[-1]) + int(blank[-1])
                has_tokens = lengths > 0
                all_ids.append(ids)
                sentence_lengths.append(lengths[has_tokens])
                sentence_documents.append(line_document[has_tokens])
                stats.lines += len(lengths)
                stats.blank_lines += int(blank.sum())
                stats.invalid_utf8_lines += int((dropped > 0).sum())
                stats.invalid_utf8_bytes += int(dropped.sum())
                stats.lines_without_tokens += int((~blank & ~has_tokens).sum())
        except tf.errors.OpError as e:
            raise DataError(f"cannot read pre-training file {path}: {e.message.splitlines()[0]}") from None
        stats.files += 1
        document += 1  # a file always ends its last document

    ids = np.concatenate(all_ids).astype(np.int32) if all_ids else np.zeros([0], np.int32)
    lengths = np.concatenate(sentence_lengths) if sentence_lengths else np.zeros([0], np.int64)
    owners = np.concatenate(sentence_documents) if sentence_documents else np.zeros([0], np.int64)
    sentence_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    # A new document starts wherever the owning document number changes.
    starts = np.flatnonzero(np.diff(owners, prepend=-1))
    document_offsets = np.append(starts, len(lengths)).astype(np.int64)
    corpus = Corpus(ids, sentence_offsets, document_offsets)
    stats.documents += corpus.num_documents
    stats.sentences += corpus.num_sentences
    stats.tokens += len(ids)
    return corpus
