"""Does continued pre-training on the task's unlabelled text help?  MiniLM vs MiniLM continued.

    bert-keras pretrain --config training/pretrain_minilm_rotten_tomatoes.yaml --model-dir RUN
    python training/continued_pretraining_rotten_tomatoes.py RUN/final --seeds 0 1 2 3 4

Both arms are fine-tuned identically with `bert_keras.finetuning.finetune` on the project's
fixed split `samples.rotten_tomatoes_split(seed=0)` (10,246 train, 2,562 dev), with all
training labels and with the first 1,000 (--train-sizes): "minilm" starts from
all-MiniLM-L6-v2 itself, "continued" from the continued pre-training's final/ (same
architecture and vocabulary; its pooler is the one trained with NSP).  The score is the
dev accuracy after the last epoch (no epoch picked on dev).  Prints one JSON line per run
and writes OUT/continued_pretraining_rotten_tomatoes.json (per-seed accuracies, means,
gain of "continued" over "minilm" per training size).
"""
import argparse
import json
import os
import time


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("continued", help="MODEL_DIR/final of the continued pre-training")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--train-sizes", type=int, nargs="+", default=[0, 1000], help="0: all training labels")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--limit-dev", type=int, default=0, help="first N dev examples only (smoke test)")
    p.add_argument("--out", default="runs/continued_pretraining_rotten_tomatoes")
    args = p.parse_args(argv)

    from bert_keras import samples
    from bert_keras.finetuning import finetune
    from bert_keras.tasks import InputExample

    (tr_x, tr_y), (dev_x, dev_y) = samples.rotten_tomatoes_split(seed=0)
    if args.limit_dev:
        dev_x, dev_y = dev_x[:args.limit_dev], dev_y[:args.limit_dev]
    names = ("negative", "positive")

    def examples(texts, labels):
        return [InputExample(text_a=t, label=names[y], guid=str(i)) for i, (t, y) in enumerate(zip(texts, labels))]

    arms = {"minilm": str(samples.fetch("minilm")), "continued": args.continued}
    dev = examples(dev_x, dev_y)
    summary = {"arms": arms, "dev_examples": len(dev), "epochs": args.epochs, "learning_rate": args.lr,
               "batch_size": args.batch_size, "max_seq_len": args.seq_len, "seeds": args.seeds,
               "score": "dev accuracy (%) after the last epoch", "results": {}}
    os.makedirs(args.out, exist_ok=True)
    for size in args.train_sizes:
        n = size or len(tr_x)
        train = examples(tr_x[:n], tr_y[:n])
        per_size = summary["results"].setdefault(f"{n}_labels", {})
        for seed in args.seeds:
            for arm, init in arms.items():
                run = os.path.join(args.out, f"{arm}_{n}_seed{seed}")
                t = time.time()
                result = finetune("classification", train, dev, init, run, epochs=args.epochs,
                                  batch_size=args.batch_size, learning_rate=args.lr, max_seq_len=args.seq_len,
                                  seed=seed, verbose=0)
                accuracy = round(result["history"][-1]["eval_accuracy"], 2)
                entry = per_size.setdefault(arm, {"last_epoch": [], "seconds": []})
                entry["last_epoch"].append(accuracy)
                entry["seconds"].append(round(time.time() - t, 1))
                print(json.dumps({"labels": n, "arm": arm, "seed": seed, "dev_accuracy": accuracy,
                                  "seconds": entry["seconds"][-1]}), flush=True)
        for entry in per_size.values():
            entry["mean"] = round(sum(entry["last_epoch"]) / len(entry["last_epoch"]), 2)
        per_size["gain_points"] = round(per_size["continued"]["mean"] - per_size["minilm"]["mean"], 2)
    path = os.path.join(args.out, "continued_pretraining_rotten_tomatoes.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    os.replace(path + ".tmp", path)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
