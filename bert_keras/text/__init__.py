"""Text pipeline in TensorFlow ops: Google-exact WordPiece tokenization and BERT packing.

    from bert_keras.text import BertTokenizer
    tok = BertTokenizer.from_vocab("vocab.txt", lower_case=True)
    ids = tok.tokenize(tf.constant(["Hello, world!"]))   # ragged int32 [B, (pieces)]
    feats = tok(texts, pairs=None, seq_len=128)          # dense int32 [B, 128] dict

Modules: `unicode_tables` (per-codepoint facts from `unicodedata`), `basic`
(cleaning, CJK, casing, punctuation), `tokenizer` (WordPiece + packing layer),
`packing` (core-op packer), `vocab` (reading and learning vocabularies).
"""

import importlib

_EXPORTS = {
    "BertTokenizer": "bert_keras.text.tokenizer",
    "BasicTokenizer": "bert_keras.text.basic",
    "pack": "bert_keras.text.packing",
    "truncated_lengths": "bert_keras.text.packing",
    "load_vocab": "bert_keras.text.vocab",
    "save_vocab": "bert_keras.text.vocab",
    "build_vocab": "bert_keras.text.vocab",
    "RESERVED_TOKENS": "bert_keras.text.vocab",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bert_keras.text' has no attribute {name!r}")


def __dir__():
    return __all__
