"""SavedModel latency: the text signature (core-op tokenizer) vs the ids signature, and vs tensorflow-text.

The model is the real all-MiniLM-L6-v2 with a (random) 2-class head; the
latency of a signature does not depend on the head's weights.  Three
signatures of the same weights are timed, each loaded with
`tf.saved_model.load` as a server does:

* ``serving_default`` of `export_saved_model` (tokenizer in core TensorFlow ops);
* the same text function built with tensorflow-text's WordPiece op (what the
  export used before; needs ``import tensorflow_text``);
* ``serve_ids``, fed the ids the tokenizer produced (no tokenisation).

Inputs are real Rotten Tomatoes dev snippets, packed to 128 tokens; median
(and 10th percentile) over --repeats calls, single examples and batches of 32.
The tokenizer alone (tf.function, same inputs) is timed both ways too.

usage:
  python benchmarks/bench_stock_serving.py [--work runs/bench_stock_serving] [--repeats 40]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _timed(fn, inputs, repeats):
    fn(**inputs[0])
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        fn(**inputs[i % len(inputs)])
        times.append(time.perf_counter() - start)
    times.sort()
    return {"median_ms": round(1e3 * times[len(times) // 2], 2), "p10_ms": round(1e3 * times[len(times) // 10], 2)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="runs/bench_stock_serving")
    p.add_argument("--repeats", type=int, default=40)
    args = p.parse_args()

    import keras
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - for the tensorflow-text variant only

    from bert_keras import samples
    from bert_keras.checkpoints import load_checkpoint, save_checkpoint
    from bert_keras.export.saved_model import _write_archive, export_saved_model, make_serving_functions
    from bert_keras.export.spec import resolve
    from bert_keras.text.tokenizer import BertTokenizer

    minilm = str(samples.fetch("minilm"))
    keras.utils.set_random_seed(0)
    model = load_checkpoint(minilm, task="classification", num_classes=2)
    folder = os.path.join(args.work, "model")
    save_checkpoint(model, folder, vocab_path=os.path.join(minilm, "vocab.txt"), lower_case=True,
                    metadata={"max_seq_len": 128, "lower_case": True, "task": "classification"})
    core_dir = export_saved_model(folder, os.path.join(args.work, "core", "1"))
    model, spec = resolve(folder)
    tftext = BertTokenizer.from_vocab(spec.vocab_path, lower_case=True)
    serve_text, _ = make_serving_functions(model, spec, tftext)
    tftext_dir = os.path.join(args.work, "tensorflow_text")
    _write_archive(tftext_dir, model, [("serving_default", serve_text, [tf.TensorSpec([None], tf.string, name="text")])])

    _, (dev, _) = samples.rotten_tomatoes_split()
    singles = [[t] for t in dev[:args.repeats]]
    batches = [dev[i * 32:(i + 1) * 32] for i in range(8)]
    core = tf.saved_model.load(core_dir).signatures
    old = tf.saved_model.load(tftext_dir).signatures["serving_default"]
    core_tok = tftext.with_wordpiece("core")
    results = {}
    for name, groups in (("single", singles), ("batch32", batches)):
        texts = [{"text": tf.constant(g)} for g in groups]
        ids = [{k: v for k, v in tftext(tf.constant(g), seq_len=128).items()} for g in groups]
        row = {"text_core": _timed(core["serving_default"], texts, args.repeats),
               "text_tensorflow_text": _timed(old, texts, args.repeats),
               "ids": _timed(core["serve_ids"], ids, args.repeats)}
        for kind, tok in (("tokenizer_core", core_tok), ("tokenizer_tensorflow_text", tftext)):
            fn = tf.function(lambda text, tok=tok: tok(text, seq_len=128),
                             input_signature=[tf.TensorSpec([None], tf.string)])
            row[kind] = _timed(fn, texts, args.repeats)
        row["text_core_over_ids"] = round(row["text_core"]["median_ms"] / row["ids"]["median_ms"], 3)
        results[name] = row
        print(name, json.dumps(row), flush=True)
    with open(os.path.join(args.work, "stock_serving_latency.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
