"""The previous in-TFLite text front-end, on tensorflow-text's TFLite kernels (kept for comparison).

`DenseTextPacker` tokenises tf.string [B] with tensorflow-text's
`FastBertTokenizer` (`FastBertNormalize` + `FastWordpieceTokenize`, custom ops
that need `tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS` at run time)
and packs with dense builtin ops.  FastBertNormalize is not Google's
BasicTokenizer character for character (it disagrees with Google's
`FullTokenizer` on about one line in ten of tests/data/tokenizer_corpus.txt).
`export_tflite` no longer uses it: `model_text.tflite` now takes codepoints and
runs builtin ops only (`text.CodepointTokenizer`); the export benchmark
converts this one to measure what the switch costs and saves.
"""

from __future__ import annotations

import tensorflow as tf

from bert_keras.errors import BertKerasError


def _read_vocab(vocab_path):
    from bert_keras.text.vocab import load_vocab, token_ids

    vocab = [str(t) for t in load_vocab(vocab_path)]
    return vocab, token_ids(vocab)


class DenseTextPacker(tf.Module):
    """Text -> BERT inputs with TFLite-convertible ops only.

    WordPiece by tensorflow-text's `FastBertTokenizer` (normalisation,
    punctuation/CJK splitting and WordPiece in two kernels that have TFLite
    implementations), then Google's packing and longest-first truncation on
    the flat values and row splits with gathers and selects.

    Args:
      vocab_path: vocab.txt.
      lower_case: uncased (lower-case, NFD, strip accents).
      seq_len: packed length.
      max_chars_per_word: words longer than this many UTF-8 bytes become
        [UNK] (tensorflow-text counts bytes; Google counts characters).
    """

    def __init__(self, vocab_path, lower_case=True, seq_len=128, max_chars_per_word=200):
        super().__init__()
        import tensorflow_text as tf_text

        from bert_keras.text.tokenizer import matchable_token

        vocab, ids = _read_vocab(vocab_path)
        for name in ("[UNK]", "[CLS]", "[SEP]", "[PAD]"):
            if name not in ids:
                raise BertKerasError(f"{vocab_path}: no {name!r} token in the vocabulary")
        # As in BertTokenizer: unique matchable tokens, mapped back to the file's ids.
        matcher = sorted((i, t) for t, i in ids.items() if matchable_token(t))
        self._remap = tf.constant([i for i, _ in matcher], tf.int32)
        self._needs_remap = [i for i, _ in matcher] != list(range(len(vocab)))
        self.seq_len = int(seq_len)
        self.cls_id, self.sep_id, self.pad_id = ids["[CLS]"], ids["[SEP]"], ids["[PAD]"]
        self._tokenizer = tf_text.FastBertTokenizer(
            vocab=[t for _, t in matcher], suffix_indicator="##", max_bytes_per_word=int(max_chars_per_word),
            token_out_type=tf.int32, unknown_token="[UNK]", lower_case_nfd_strip_accents=bool(lower_case),
            support_detokenization=False)

    def _flat(self, texts):
        ragged = self._tokenizer.tokenize(texts)
        values = ragged.flat_values
        if self._needs_remap:
            values = tf.gather(self._remap, values)
        splits = tf.cast(ragged.row_splits, tf.int32)
        return values, splits[:-1], splits[1:] - splits[:-1]

    @staticmethod
    def _take(values, starts, offsets, valid):
        # Gather from the flat values with clipped indices, selected where valid:
        # dense ops only (ragged slicing has no TFLite lowering).
        padded = tf.concat([values, tf.zeros([1], values.dtype)], 0)
        idx = tf.clip_by_value(starts[:, None] + offsets, 0, tf.shape(padded)[0] - 1)
        return tf.where(valid, tf.gather(padded, idx), 0)

    def __call__(self, text, text_b=None):
        """text (and text_b): tf.string [B] -> dict of int32 [B, seq_len]."""
        from bert_keras.text.packing import pack_dense

        values_a, start_a, len_a = self._flat(text)
        take_b = len_b = None
        if text_b is not None:
            values_b, start_b, len_b = self._flat(text_b)
            take_b = lambda offsets, valid: self._take(values_b, start_b, offsets, valid)  # noqa: E731
        return pack_dense(lambda offsets, valid: self._take(values_a, start_a, offsets, valid), len_a,
                          take_b, len_b, seq_len=self.seq_len, cls_id=self.cls_id, sep_id=self.sep_id,
                          pad_id=self.pad_id)
