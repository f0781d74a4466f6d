"""Export benchmark: sizes, single-example latency and quantised accuracy on real data.

The model is all-MiniLM-L6-v2 fine-tuned on the real Rotten Tomatoes polarity
snippets (the project's fixed split, `samples.rotten_tomatoes_split(seed=0)`).
Pass --model-dir for a folder already fine-tuned (e.g. `runs/demo/sentiment/best`
from `bert-keras demo`); without it the script fine-tunes one itself on the first
--train-examples training snippets (--epochs, AdamW --learning-rate).

Measured:
  * dev accuracy of the Keras model, the SavedModel text signature, and every
    TFLite file (float32, float16, dynamic-range int8, full int8 and int8_mixed
    calibrated on 200 real training snippets; `--quantize ... int8_mixed` adds
    the mixed file); ids files are fed by the Google-exact tokenizer,
    model_text.tflite tokenises inside LiteRT;
  * file sizes; median single-example latency (text in, logits out) of the
    SavedModel and of LiteRT;
  * the in-TFLite tokenizer alone (`export_tokenizer_tflite`: codepoints in,
    builtin ops) against the previous tensorflow-text front-end
    (`DenseTextPacker`, custom ops): single-example latency, file size, and
    exact-match rate vs Google's FullTokenizer (tf-models-official) on
    tests/data/tokenizer_corpus.txt and on the dev snippets.

usage:
  python benchmarks/bench_export.py [--model-dir D] [--work runs/bench_export] [--dev-examples N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _examples(texts, labels):
    from bert_keras.tasks import InputExample

    names = ("negative", "positive")
    return [InputExample(text_a=t, label=names[y], guid=str(i)) for i, (t, y) in enumerate(zip(texts, labels))]


def finetuned_model(args, train):
    if args.model_dir:
        return args.model_dir
    from bert_keras import samples
    from bert_keras.finetuning import finetune

    minilm = str(samples.fetch("minilm"))
    texts, labels = train
    n = args.train_examples
    out = os.path.join(args.work, "sentiment")
    result = finetune("classification", _examples(texts[:n], labels[:n]), None, minilm, out, epochs=args.epochs,
                      batch_size=32, learning_rate=args.learning_rate, max_seq_len=args.max_seq_len, seed=0,
                      verbose=0, overwrite=True)
    print(f"fine-tuned MiniLM on {n} training snippets ({args.epochs} epochs) in {result['train_seconds']:.0f} s",
          flush=True)
    return result["best_checkpoint"]


def tokenizer_file(vocab_path, lower_case, seq_len, path, frontend):
    """A tokenizer-only TFLite file: "codepoints" (builtin ops) or "tftext" (tensorflow-text kernels)."""
    import tensorflow as tf

    from bert_keras.export import tflite

    if frontend == "codepoints":
        return tflite.export_tokenizer_tflite(vocab_path, path, lower_case=lower_case, seq_len=seq_len)
    packer = tflite.DenseTextPacker(vocab_path, lower_case, seq_len)
    with tempfile.TemporaryDirectory() as tmp:
        conv = tflite.make_converter(lambda text: packer(text), [tf.TensorSpec([None], tf.string, name="text")], tmp)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        conv.allow_custom_ops = True  # the tensorflow-text kernels
        tflite._write(path, tflite.convert_model(conv, "tokenizer"))
    return path


def tokenizer_exact_match(lite, vocab_path, lower_case, texts, seq_len, batch_size=64) -> dict:
    """How often a tokenizer-only TFLite file agrees with Google's FullTokenizer on packed ids.

    Both sides see the same text: a codepoint file keeps the first
    `max_codepoints` codepoints (its input contract), so Google tokenizes that
    prefix; ids are compared as [CLS] text [SEP] truncated to seq_len.

    Returns:
      {"lines", "exact", "rate" (percent), "mismatches": first few texts}.
    """
    from official.nlp.tools import tokenization

    google = tokenization.FullTokenizer(vocab_path, do_lower_case=lower_case)
    google.wordpiece_tokenizer.max_input_chars_per_word = 200  # as BertTokenizer and the TFLite files
    budget = lite.max_codepoints
    exact, bad = 0, []
    for i in range(0, len(texts), batch_size):
        chunk = texts[i:i + batch_size]
        got = lite(text=np.array(chunk, dtype=object))
        for t, ids, mask in zip(chunk, got["token_ids"], got["padding_mask"]):
            seen = t[:budget] if budget else t
            want = google.convert_tokens_to_ids(["[CLS]"] + google.tokenize(seen)[:seq_len - 2] + ["[SEP]"])
            if list(ids[: int(mask.sum())]) == want:
                exact += 1
            elif len(bad) < 10:
                bad.append(t)
    return {"lines": len(texts), "exact": exact, "rate": 100.0 * exact / max(len(texts), 1), "mismatches": bad}


def accuracy(pred_ids, labels):
    return 100.0 * float(np.mean(np.asarray(pred_ids) == np.asarray(labels)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-dir", help="a fine-tuned sentiment folder (default: fine-tune one)")
    p.add_argument("--work", default="runs/bench_export")
    p.add_argument("--train-examples", type=int, default=4000)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--dev-examples", type=int, default=2562, help="dev snippets to score (2562 = all)")
    p.add_argument("--max-seq-len", type=int, default=64)
    p.add_argument("--repeats", type=int, default=30, help="latency repetitions")
    p.add_argument("--quantize", nargs="+", default=["none", "float16", "dynamic", "int8"],
                   help="TFLite variants to measure (none = float32, the agreement reference, always runs)")
    p.add_argument("--skip-saved-model", action="store_true")
    p.add_argument("--kinds", nargs="+", default=["ids", "text"], choices=["ids", "text"],
                   help="TFLite files to score: ids (model.tflite) and/or text (model_text.tflite)")
    p.add_argument("--skip-tokenizer-match", action="store_true",
                   help="skip the in-TFLite tokenizers vs Google exact-match and latency measurement")
    p.add_argument("--outlier-factor", type=float, default=None,
                   help="full int8: export_tflite's outlier_factor (inf = no rescaling; default: the library's)")
    args = p.parse_args(argv)

    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from bert_keras import samples
    from bert_keras.export import TFLiteModel, export_saved_model, export_tflite, resolve
    from bert_keras.choices import CALIBRATED
    from bert_keras.export.saved_model import saved_model_size_mb
    from bert_keras.export.tflite import file_size_mb, latency_ms
    from bert_keras.text.tokenizer import BertTokenizer

    t0 = time.perf_counter()
    train, (dev_x, dev_y) = samples.rotten_tomatoes_split(seed=0)
    dev_x, dev_y = dev_x[:args.dev_examples], dev_y[:args.dev_examples]
    model_dir = finetuned_model(args, train)
    model, spec = resolve(model_dir)
    # label index of "positive" in the folder's label order
    pos = spec.labels.index("positive") if "positive" in spec.labels else 1
    gold = [pos if y == 1 else 1 - pos for y in dev_y]
    tok = BertTokenizer.from_vocab(spec.vocab_path, lower_case=spec.lower_case)
    feats = {k: v.numpy() for k, v in tok(dev_x, seq_len=spec.max_seq_len).items()}

    rows, results = [], {"model_dir": model_dir, "dev_examples": len(dev_x), "max_seq_len": spec.max_seq_len}
    keras_logits = np.concatenate([np.asarray(model({k: v[i:i + 128] for k, v in feats.items()}, training=False))
                                   for i in range(0, len(dev_x), 128)])
    results["keras_accuracy"] = accuracy(keras_logits.argmax(-1), gold)

    one = dev_x[:1]
    if not args.skip_saved_model:
        sm_dir = export_saved_model(model_dir, os.path.join(args.work, "saved_model", "1"))
        serving = tf.saved_model.load(sm_dir).signatures["serving_default"]
        sm_logits = np.concatenate([serving(text=tf.constant(dev_x[i:i + 128]))["logits"].numpy()
                                    for i in range(0, len(dev_x), 128)])
        rows.append({"format": "SavedModel (text signature)", "mb": saved_model_size_mb(sm_dir),
                     "accuracy": accuracy(sm_logits.argmax(-1), gold),
                     "max_abs_logit_diff": float(np.abs(sm_logits - keras_logits).max()),
                     "latency_ms": latency_ms(lambda: serving(text=tf.constant(one)), repeats=args.repeats)})
        print(rows[-1], flush=True)

    calibration = train[0][-200:]  # real training snippets not used for fine-tuning by default
    tfl_dir = os.path.join(args.work, "tflite")
    f32_logits = None
    for q in ["none"] + [q for q in args.quantize if q != "none"]:
        start = time.perf_counter()
        calib = calibration if q in CALIBRATED else None
        extra = {} if args.outlier_factor is None else {"outlier_factor": args.outlier_factor}
        paths = export_tflite(model_dir, tfl_dir, quantize=q, calibration_texts=calib, text_model="text" in args.kinds,
                              **extra)
        convert_s = time.perf_counter() - start
        for kind in ["ids"] + [k for k in args.kinds if k != "ids"]:
            lite = TFLiteModel(paths[kind])
            if kind == "ids":
                logits = np.concatenate([lite(**{k: v[i:i + 64] for k, v in feats.items()})["logits"]
                                         for i in range(0, len(dev_x), 64)])
                single = {k: v[:1] for k, v in feats.items()}
                lat = latency_ms(lambda: lite(**single), repeats=args.repeats)
            else:
                logits = np.concatenate([lite(text=np.array(dev_x[i:i + 64], dtype=object))["logits"]
                                         for i in range(0, len(dev_x), 64)])
                lat = latency_ms(lambda: lite(text=np.array(one, dtype=object)), repeats=args.repeats)
            if q == "none" and f32_logits is None:
                f32_logits = logits
            rows.append({"format": f"TFLite {q if q != 'none' else 'float32'} ({os.path.basename(paths[kind])})",
                         "mb": file_size_mb(paths[kind]), "accuracy": accuracy(logits.argmax(-1), gold),
                         "max_abs_logit_diff": float(np.abs(logits - keras_logits).max()),
                         "agreement_with_float32": 100.0 * float(np.mean(logits.argmax(-1) == f32_logits.argmax(-1))),
                         "latency_ms": lat, "convert_s": convert_s})
            print(rows[-1], flush=True)

    with open(os.path.join(HERE, "..", "tests", "data", "tokenizer_corpus.txt"), encoding="utf-8") as f:
        lines = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#")]
    if not args.skip_tokenizer_match:
        for frontend in ("codepoints", "tftext"):
            path = tokenizer_file(spec.vocab_path, spec.lower_case, spec.max_seq_len,
                                  os.path.join(tfl_dir, f"tokenizer_{frontend}.tflite"), frontend)
            lite = TFLiteModel(path)
            results[f"tokenizer_{frontend}"] = {
                "mb": file_size_mb(path),
                "latency_ms": latency_ms(lambda: lite(text=np.array(one, dtype=object)), repeats=args.repeats),
                "corpus": tokenizer_exact_match(lite, spec.vocab_path, spec.lower_case, lines, spec.max_seq_len),
                "dev": tokenizer_exact_match(lite, spec.vocab_path, spec.lower_case, list(dev_x), spec.max_seq_len)}
            print(frontend, {k: v if not isinstance(v, dict) else v["rate"] for k, v in
                             results[f"tokenizer_{frontend}"].items()}, flush=True)
    results["rows"] = rows
    results["seconds"] = time.perf_counter() - t0

    print(f"\nMiniLM-L6 sentiment, Rotten Tomatoes dev ({len(dev_x)} snippets), seq len {spec.max_seq_len}; "
          f"Keras float32 accuracy {results['keras_accuracy']:.2f}%")
    print("| format | size MB | dev accuracy % | agreement with float32 % | max abs logit diff vs Keras | "
          "single-example latency ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        agree = r.get("agreement_with_float32")
        print(f"| {r['format']} | {r['mb']:.1f} | {r['accuracy']:.2f} | "
              f"{'-' if agree is None else f'{agree:.1f}'} | {r['max_abs_logit_diff']:.2e} | {r['latency_ms']:.1f} |")
    for frontend in ("codepoints", "tftext"):
        r = results.get(f"tokenizer_{frontend}")
        if r:
            print(f"tokenizer-only TFLite ({frontend}): {r['mb']:.2f} MB, {r['latency_ms']:.2f} ms; exact vs Google: "
                  f"corpus {r['corpus']['exact']}/{r['corpus']['lines']} = {r['corpus']['rate']:.1f}%, "
                  f"dev {r['dev']['exact']}/{r['dev']['lines']} = {r['dev']['rate']:.1f}%")
    os.makedirs(args.work, exist_ok=True)
    with open(os.path.join(args.work, "bench_export.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
