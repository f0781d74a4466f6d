"""The calibration inputs of the quantised TFLite files: real sentences tokenised exactly."""

from __future__ import annotations

from bert_keras.export.tflite.text import codepoints
from bert_keras.models.inputs import INPUT_NAMES


def length_signature(length) -> str:
    """The signature name of a length bucket: 16 -> "length_16"."""
    return f"length_{int(length)}"


def split_pairs(texts, mc, k):
    a, b = [], []
    for t in texts:
        if isinstance(t, (tuple, list)):
            a.append(str(t[0]))
            rest = t[1]
            b.append(list(rest)[:k] + [""] * (k - len(rest)) if mc else str(rest))
        else:
            a.append(str(t))
            b.append([""] * k if mc else "")
    return a, b


def representative_ids(spec, texts, mc, k, limit=200, buckets=None):
    """Calibration batches (one example each) tokenised with the exact tokenizer.

    With length buckets, (signature, inputs) pairs: every example for
    ``serving_default`` and, cut to each bucket's length, for every bucket
    signature (the converter calibrates each signature on its own inputs).
    """
    from bert_keras.text.tokenizer import BertTokenizer

    tok = BertTokenizer.from_vocab(spec.vocab_path, lower_case=spec.lower_case)
    a, b = split_pairs(list(texts)[:limit], mc, k)

    def examples():
        for x, y in zip(a, b):
            if mc:
                feats = tok([x] * k, pairs=y, seq_len=spec.max_seq_len)
                yield {n: feats[n].numpy()[None] for n in INPUT_NAMES}
            else:
                feats = tok([x], pairs=[y] if spec.pair else None, seq_len=spec.max_seq_len)
                yield {n: feats[n].numpy() for n in INPUT_NAMES}

    def gen():
        if not buckets:
            yield from examples()
            return
        for item in examples():
            yield "serving_default", item
            for length in buckets:
                yield length_signature(length), {n: v[..., :length] for n, v in item.items()}

    return gen


def batched(examples, size=32):
    """One-example feature dicts -> dicts of `size` examples."""
    import numpy as np

    batch = []
    for item in examples:
        batch.append(item)
        if len(batch) == size:
            yield {n: np.concatenate([b[n] for b in batch]) for n in batch[0]}
            batch = []
    if batch:
        yield {n: np.concatenate([b[n] for b in batch]) for n in batch[0]}


def representative_texts(spec, texts, mc, k, n_cp, limit=200):
    a, b = split_pairs(list(texts)[:limit], mc, k)

    def gen():
        for x, y in zip(a, b):
            item = {"codepoints": codepoints([x], n_cp)}
            if spec.pair:
                item["codepoints_b"] = codepoints(y, n_cp)[None] if mc else codepoints([y], n_cp)
            yield item

    return gen
