"""`BertTokenizer`: Google-exact WordPiece tokenization and input packing, in graph.

Pipeline (all TensorFlow ops, usable eagerly, in `tf.function`, in
`tf.data.Dataset.map` and inside exported SavedModels):

    text --BasicTokenizer--> words --WordPiece--> ids --pack--> BERT inputs

* Basic tokenization: `bert_keras.text.basic` (Google's cleaning, CJK
  splitting, casing, accent stripping and punctuation rules, exactly).
* WordPiece: greedy longest-match-first with `##` continuations; a word
  that cannot be covered, or that has more than `max_chars_per_word`
  characters, becomes `[UNK]`.  Two implementations with the same output as
  Google's loop, chosen by `wordpiece=`:
  "tensorflow_text" (default, fastest for training and `tf.data`):
    tensorflow-text's `FastWordpieceTokenizer` op.  Its own limit counts UTF-8
    bytes, so it is set out of the way and the character limit is applied
    here.
  "core": `bert_keras.text.wordpiece.WordPiece`, core TensorFlow ops only;
    what the exporters use, so exported graphs load without tensorflow-text.
  Google's original google-research/bert uses a limit of 200 characters (the
  default here), tf-models-official's fork 400, Hugging Face 100.
* Packing: `bert_keras.text.packing.pack`.

Ids always come from the vocabulary file (`[CLS]`, `[SEP]`, ... are looked up
by name), with Google's rule for duplicated lines (the last one wins).

Export: everything the graph needs (the Unicode tables and the WordPiece
model, which holds the vocabulary) is a constant captured by the traced
functions, so a SavedModel written with `keras.export.ExportArchive`
(`archive.track(tok)`, then endpoints calling `tok`) is self-contained: with
`wordpiece="core"` it loads in any TensorFlow process, with
"tensorflow_text" after `import tensorflow_text`.  `get_config()` carries the
vocabulary list, so `BertTokenizer.from_config` rebuilds the layer.
"""

from __future__ import annotations

import os
from typing import Sequence

import keras
import numpy as np
import tensorflow as tf

from bert_keras import _private_api
from bert_keras.errors import DataError
from bert_keras.text import packing
from bert_keras.text.basic import BasicTokenizer, Words
from bert_keras.text.vocab import MAX_VOCAB_SIZE, load_vocab, token_ids
from bert_keras.text.wordpiece import WordPiece

WORDPIECE = ("tensorflow_text", "core")


def matchable_token(token: str) -> bool:
    # Tokens WordPiece can never match (empty, bare "##", containing
    # whitespace: words never do) are left out of the matcher; they keep their
    # ids, nothing maps to them, exactly as in Google's dictionary lookups.
    # (``split() == [token]``: no str.isspace() character, tested in C.)
    return bool(token) and token != "##" and token.split() == [token]


def _first_words(words, max_words: int):
    """The first `max_words` words of every text of a `Words` batch."""
    counts = tf.math.bincount(words.row, minlength=words.num_texts, maxlength=words.num_texts, dtype=tf.int64)
    rank = tf.range(tf.shape(words.row, out_type=tf.int64)[0]) - tf.gather(tf.cumsum(counts, exclusive=True), words.row)
    keep = tf.where(rank < max_words)[:, 0]
    return Words(tf.gather(words.codepoints, keep), tf.gather(words.row, keep), tf.gather(words.group, keep),
                 words.num_texts)


class _VocabTable:
    """Tokens by id and the id of each token.

    A plain object on purpose: a list or dict attribute of a Keras layer is
    wrapped and walked entry by entry by Keras' attribute tracking (cost:
    docs/design.md, "Measured choices").
    """

    __slots__ = ("tokens", "ids")

    def __init__(self, tokens):
        self.tokens = tuple(tokens)
        self.ids = token_ids(self.tokens)


@keras.saving.register_keras_serializable(package="bert_keras")
class BertTokenizer(keras.layers.Layer):
    """WordPiece tokenizer identical to Google's `FullTokenizer`, plus BERT packing.

    Args:
      vocabulary: list of tokens (index = id) or the path of a vocab.txt.
      lower_case: uncased models (lower-case, NFD, strip accents) when True.
      max_chars_per_word: longer words become `[UNK]` (Google: 200).
      wordpiece: "tensorflow_text" (tensorflow-text's op, fastest) or "core"
        (core TensorFlow ops only, for graphs that must load without
        tensorflow-text); identical ids.
      unk_token, cls_token, sep_token, pad_token, mask_token: names of the
        special tokens in the vocabulary.

    Call:
      `tok(texts, pairs=None, seq_len=128)` with tf.string [B] (or python
      strings) returns a dict of dense int32 [B, seq_len] tensors
      `token_ids`, `segment_ids`, `padding_mask` (see `pack`).

    Example:
      >>> tok = BertTokenizer.from_vocab("vocab.txt", lower_case=True)
      >>> tok.tokenize(tf.constant(["Hello, world!"])).to_list()
      [[7592, 1010, 2088, 999]]
      >>> feats = tok(["a question"], pairs=["a passage"], seq_len=16)
      >>> feats["token_ids"].shape
      TensorShape([1, 16])
    """

    def __init__(
        self,
        vocabulary: Sequence[str] | str,
        lower_case: bool = True,
        max_chars_per_word: int = 200,
        unk_token: str = "[UNK]",
        cls_token: str = "[CLS]",
        sep_token: str = "[SEP]",
        pad_token: str = "[PAD]",
        mask_token: str = "[MASK]",
        wordpiece: str = "tensorflow_text",
        **kwargs,
    ):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        # Keep string/ragged tensors as they are (Keras would convert inputs).
        _private_api.accept_raw_inputs(self)
        self.built = True
        source = None
        if isinstance(vocabulary, (str, os.PathLike)):
            source = os.fspath(vocabulary)
            vocabulary = load_vocab(source)
        vocabulary = list(vocabulary)
        if len(vocabulary) > MAX_VOCAB_SIZE:  # before any table is built
            raise DataError(f"{source or 'vocabulary'}: {len(vocabulary):,} tokens, more than the "
                            f"{MAX_VOCAB_SIZE:,} a vocabulary can hold (tensorflow-text's WordPiece limit)")
        self._table = _VocabTable(str(t) for t in vocabulary)
        if not self._vocab:
            raise DataError("empty vocabulary")
        self._source = source or "vocabulary"
        self._lower_case = bool(lower_case)
        self._max_chars_per_word = int(max_chars_per_word)
        if self._max_chars_per_word < 1:
            raise ValueError(f"max_chars_per_word must be >= 1, got {max_chars_per_word}")
        self._special = {
            "unk": unk_token, "cls": cls_token, "sep": sep_token, "pad": pad_token, "mask": mask_token,
        }
        if unk_token not in self._ids:
            raise DataError(f"{self._source}: no {unk_token!r} token in the vocabulary")

        if wordpiece not in WORDPIECE:
            raise ValueError(f"wordpiece must be one of {WORDPIECE}, got {wordpiece!r}")
        self._wordpiece_kind = wordpiece
        self._basic = BasicTokenizer(lower_case=self._lower_case)
        if wordpiece == "core":
            self._remap = None
            self._wordpiece = WordPiece(self._ids, self.unk_id, self._max_chars_per_word, usable=matchable_token)
            return
        # FastWordpieceTokenizer needs unique tokens; Google's dict keeps the
        # last id of a duplicated token, so give it those and map back.
        matcher = sorted((i, t) for t, i in self._ids.items() if matchable_token(t))
        matcher_tokens = [t for _, t in matcher]
        matcher_ids = np.array([i for i, _ in matcher], dtype=np.int32)
        self._remap = None
        if not np.array_equal(matcher_ids, np.arange(len(self._vocab))):
            self._remap = tf.constant(matcher_ids)
        import tensorflow_text as tf_text

        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=matcher_tokens,
            suffix_indicator="##",
            # bytes limit out of the way: the character limit is applied here
            max_bytes_per_word=4 * self._max_chars_per_word + 4,
            token_out_type=tf.int32,
            unknown_token=unk_token,
            no_pretokenization=True,
        )

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_vocab(cls, vocab_path, lower_case: bool = True, max_chars_per_word: int = 200, **kwargs):
        """Builds a tokenizer from a vocab.txt (one token per line, id = line number)."""
        return cls(os.fspath(vocab_path), lower_case=lower_case, max_chars_per_word=max_chars_per_word, **kwargs)

    def with_wordpiece(self, wordpiece: str) -> "BertTokenizer":
        """The same tokenizer with the other WordPiece implementation (self if already it)."""
        if wordpiece == self._wordpiece_kind:
            return self
        return BertTokenizer.from_config({**self.get_config(), "wordpiece": wordpiece})

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary=list(self._vocab),
            lower_case=self._lower_case,
            max_chars_per_word=self._max_chars_per_word,
            unk_token=self._special["unk"],
            cls_token=self._special["cls"],
            sep_token=self._special["sep"],
            pad_token=self._special["pad"],
            mask_token=self._special["mask"],
            wordpiece=self._wordpiece_kind,
        )
        return config

    # ------------------------------------------------------------------ vocabulary facts
    _vocab = property(lambda self: self._table.tokens)
    _ids = property(lambda self: self._table.ids)

    @property
    def vocab(self) -> list[str]:
        """Tokens by id (a copy)."""
        return list(self._vocab)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    @property
    def lower_case(self) -> bool:
        return self._lower_case

    @property
    def max_chars_per_word(self) -> int:
        return self._max_chars_per_word

    @property
    def wordpiece(self) -> str:
        """The WordPiece implementation: "tensorflow_text" or "core"."""
        return self._wordpiece_kind

    def token_to_id(self, token: str) -> int:
        if token not in self._ids:
            raise KeyError(f"{token!r} is not in {self._source}")
        return self._ids[token]

    def id_to_token(self, token_id: int) -> str:
        return self._vocab[int(token_id)]

    def _special_id(self, kind: str):
        return self._ids.get(self._special[kind])

    unk_id = property(lambda self: self._special_id("unk"), doc="id of [UNK]")
    cls_id = property(lambda self: self._special_id("cls"), doc="id of [CLS] (None if absent)")
    sep_id = property(lambda self: self._special_id("sep"), doc="id of [SEP] (None if absent)")
    pad_id = property(lambda self: self._special_id("pad"), doc="id of [PAD] (None if absent)")
    mask_id = property(lambda self: self._special_id("mask"), doc="id of [MASK] (None if absent)")

    @property
    def special_ids(self) -> list[int]:
        """Ids of the special tokens present in the vocabulary."""
        return sorted({i for i in (self._special_id(k) for k in self._special) if i is not None})

    # ------------------------------------------------------------------ tokenization
    def _pieces(self, texts, max_words=None):
        """Flat words of a batch and their WordPiece ids: (Words, ragged int32 [W, (p)]).

        max_words: keep only the first max_words words of every text.
        """
        words = self._basic.split(texts)
        if max_words is not None:
            words = _first_words(words, max_words)
        strings = tf.strings.unicode_encode(words.codepoints, "UTF-8")
        if self._wordpiece_kind == "core":
            return words, self._wordpiece.tokenize(words.codepoints, strings)
        too_long = words.codepoints.row_lengths() > self._max_chars_per_word
        pieces = self._wordpiece.tokenize(tf.where(too_long, "", strings))
        if self._remap is not None:
            pieces = pieces.with_flat_values(tf.gather(self._remap, pieces.flat_values))
        unk = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(too_long, tf.int64))], tf.constant(self.unk_id, tf.int32)),
            tf.cast(too_long, tf.int64),
            validate=False,
        )
        pieces = tf.concat([pieces, unk], axis=1)  # empty rows + [UNK] for long words
        return words, pieces

    @staticmethod
    def _batch(texts):
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        if texts.shape.rank not in (0, 1):
            raise ValueError(f"texts must be a string scalar or vector [B], got shape {texts.shape}")
        return texts, texts.shape.rank == 0

    def tokenize(self, texts, max_words=None):
        """WordPiece ids of texts, without special tokens.

        Args:
          texts: tf.string [B] or a scalar (python strings are accepted).
          max_words: tokenise only the first max_words basic-tokenizer words
            of each text (None: all).  Every word gives at least one piece, so
            the first n pieces of a text are the same for any max_words >= n.

        Returns:
          tf.RaggedTensor int32 [B, (pieces)]; for a scalar input a dense
          int32 [pieces] tensor.  Equal to Google's
          `FullTokenizer.convert_tokens_to_ids(FullTokenizer.tokenize(text))`.
        """
        texts, scalar = self._batch(texts)
        words, pieces = self._pieces(tf.reshape(texts, [-1]) if scalar else texts, max_words)
        out = tf.RaggedTensor.from_value_rowids(pieces, words.row, nrows=words.num_texts, validate=False)
        out = out.merge_dims(1, 2)
        return out[0] if scalar else out

    def tokenize_words(self, texts, split_on_punctuation: bool = True):
        """WordPiece ids grouped by word: tf.RaggedTensor int32 [B, (words), (pieces)].

        Flattening the word axis gives exactly `tokenize(texts)`.

        Args:
          split_on_punctuation: which grouping.
            True (default): Google's basic-tokenizer words, i.e. a word and its
              `##` continuations, every punctuation mark a word of its own.
              This is the grouping of Google's whole-word masking
              (`create_pretraining_data.py` joins a piece starting with `##`
              to the previous one) and the unit NER/SQuAD readers label.
            False: whitespace-delimited tokens of the text (CJK ideographs are
              tokens of their own, as in Google's code), so "don't" or
              "U.S.A." is one group with its punctuation pieces; a stronger
              whole-word masking.
        """
        texts, scalar = self._batch(texts)
        words, pieces = self._pieces(tf.reshape(texts, [-1]) if scalar else texts)
        if split_on_punctuation:
            out = tf.RaggedTensor.from_value_rowids(pieces, words.row, nrows=words.num_texts, validate=False)
        else:
            num_groups = tf.reduce_max(tf.concat([[tf.constant(-1, tf.int64)], words.group], 0)) + 1
            piece_group = tf.repeat(words.group, pieces.row_lengths())
            grouped = tf.RaggedTensor.from_value_rowids(pieces.flat_values, piece_group, nrows=num_groups, validate=False)
            group_row = tf.math.unsorted_segment_min(words.row, words.group, num_groups)
            out = tf.RaggedTensor.from_value_rowids(grouped, group_row, nrows=words.num_texts, validate=False)
        return out[0] if scalar else out

    def basic_tokenize(self, texts):
        """Google's basic-tokenizer words (before WordPiece): tf.string [B, (words)]."""
        return self._basic.words(texts)

    def detokenize(self, ids):
        """Ids back to space-joined WordPiece tokens with `##` joins undone.

        Not an inverse of tokenization (casing, accents and spacing around
        punctuation are gone); meant for looking at ids.  ids: int [B, (n)]
        ragged or dense, or a python list of lists.  Returns tf.string [B].
        """
        vocab = tf.constant(self._vocab)
        if isinstance(ids, (list, tuple)):
            ids = tf.ragged.constant(ids, dtype=tf.int32)
        tokens = tf.gather(vocab, ids)
        joined = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        return tf.strings.regex_replace(joined, " ##", "")

    # ------------------------------------------------------------------ packing
    def pack(self, ids_a, ids_b=None, seq_len: int = 128) -> dict:
        """`[CLS] A [SEP] (B [SEP])`, Google's longest-first truncation, padding.

        Args:
          ids_a, ids_b: tf.RaggedTensor int [B, (n)] of WordPiece ids without
            special tokens (e.g. from `tokenize`); ids_b optional.
          seq_len: output length.

        Returns:
          dict of dense int32 [B, seq_len]: "token_ids", "segment_ids" (0 for
          `[CLS] A [SEP]`, 1 for `B [SEP]`), "padding_mask" (1 = real token).
        """
        for kind in ("cls", "sep", "pad"):
            if self._special_id(kind) is None:
                raise DataError(f"{self._source}: no {self._special[kind]!r} token in the vocabulary, cannot pack")
        return packing.pack(
            ids_a, ids_b, seq_len=seq_len, cls_id=self.cls_id, sep_id=self.sep_id, pad_id=self.pad_id
        )

    def call(self, texts, pairs=None, seq_len: int = 128):
        """Texts (and optional second segments) to BERT inputs; see `pack`."""
        texts, scalar = self._batch(texts)
        if scalar:
            texts = tf.reshape(texts, [1])
        # Words past the first seq_len of a text cannot reach the packed output
        # (each word gives >= 1 piece), nor change the pair truncation (a
        # segment that long is cut to its share either way): skipping them
        # bounds the work on huge inputs.
        ids_a = self.tokenize(texts, max_words=seq_len)
        ids_b = None
        if pairs is not None:
            pairs = tf.reshape(tf.convert_to_tensor(pairs, dtype=tf.string), [-1])
            ids_b = self.tokenize(pairs, max_words=seq_len)
        feats = self.pack(ids_a, ids_b, seq_len=seq_len)
        return {k: v[0] for k, v in feats.items()} if scalar else feats

    def compute_output_spec(self, texts, pairs=None, seq_len: int = 128):
        spec = keras.KerasTensor([None, seq_len], dtype="int32")
        return {"token_ids": spec, "segment_ids": spec, "padding_mask": spec}
