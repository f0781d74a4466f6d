"""Transfer check: Rotten Tomatoes polarity fine-tuned from a pre-trained checkpoint vs random init.

    python training/transfer_rotten_tomatoes.py runs/pretrain_mini_wiki/final \\
        --seeds 0 1 2 --epochs 3 --lr 1e-4 --out runs/transfer

Both arms have the same architecture (the checkpoint's config), the same vocabulary
(the checkpoint's vocab.txt), the same fine-tuning dropout (--dropout, default 0.1,
set on both: the pre-training recipe trains without dropout) and the same fine-tuning:
`bert_keras.finetuning.finetune` (AdamW, weight decay 0.01 except LayerNorm/bias, 10%
linear warm-up then linear decay, clipping 1.0, length-bucketed batches) on the
project's fixed split `samples.rotten_tomatoes_split(seed=0)` (10,246 train, 2,562
dev).  "random" draws a fresh BERT initialisation (truncated normal 0.02) per seed;
"pretrained" copies the checkpoint's encoder (its NSP-trained pooler included).

Every (learning rate, arm, seed) is one run; the score is the dev accuracy after the
last epoch (no epoch picked on dev).  Prints one line per run and, last, a JSON
summary with both arms' per-seed accuracies and means per learning rate (also written
to OUT/transfer.json).
"""
import argparse
import dataclasses
import json
import os
import time


def build_init(arm, checkpoint, folder, dropout, seed, reinit_pooler=False):
    """Writes the arm's initial encoder (fine-tuning dropout set) to ``folder``.

    ``reinit_pooler``: the pre-trained arm keeps the fresh initialisation's pooler instead of
    the NSP-trained one (the random arm is unchanged by it)."""
    import keras

    import bert_keras as bk

    source = bk.load_checkpoint(checkpoint)
    cfg = dataclasses.replace(source.config, dropout=dropout, attention_dropout=dropout)
    keras.utils.set_random_seed(seed)
    encoder = bk.BertEncoder(cfg)
    if arm == "pretrained":
        fresh_pooler = [w.numpy() for w in encoder.pooler.weights]
        encoder.set_weights(source.get_weights())
        if reinit_pooler:
            encoder.pooler.set_weights(fresh_pooler)
    bk.save_checkpoint(encoder, folder, vocab_path=os.path.join(checkpoint, "vocab.txt"),
                       lower_case=getattr(source, "lower_case", None))
    return folder


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="pre-trained folder, e.g. MODEL_DIR/final of bert-keras pretrain")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, nargs="+", default=[1e-4], help="learning rate grid (both arms)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--arms", nargs="+", default=["pretrained", "random"], choices=["pretrained", "random"])
    p.add_argument("--reinit-pooler", action="store_true",
                   help="pre-trained arm: a freshly initialised pooler instead of the NSP-trained one")
    p.add_argument("--train-size", type=int, default=0,
                   help="fine-tune on the first N training examples only (a random subset: the split is "
                        "already shuffled); the dev set stays whole. The low-label regime of the transfer check")
    p.add_argument("--limit", type=int, default=0, help="first N train/dev examples only (smoke test)")
    p.add_argument("--out", default="runs/transfer_rotten_tomatoes")
    args = p.parse_args(argv)
    if not os.path.exists(os.path.join(args.checkpoint, "vocab.txt")):
        raise SystemExit(f"{args.checkpoint}: no vocab.txt (expected a pre-training MODEL_DIR/final folder)")

    from bert_keras import samples
    from bert_keras.finetuning import finetune
    from bert_keras.tasks import InputExample

    (tr_x, tr_y), (dev_x, dev_y) = samples.rotten_tomatoes_split(seed=0)
    if args.limit:
        tr_x, tr_y, dev_x, dev_y = tr_x[:args.limit], tr_y[:args.limit], dev_x[:args.limit], dev_y[:args.limit]
    if args.train_size:
        if args.train_size > len(tr_x):
            raise SystemExit(f"--train-size {args.train_size}: only {len(tr_x)} training examples")
        tr_x, tr_y = tr_x[:args.train_size], tr_y[:args.train_size]
    names = ("negative", "positive")

    def examples(texts, labels):
        return [InputExample(text_a=t, label=names[y], guid=str(i)) for i, (t, y) in enumerate(zip(texts, labels))]

    train, dev = examples(tr_x, tr_y), examples(dev_x, dev_y)
    os.makedirs(args.out, exist_ok=True)
    summary = {"checkpoint": os.path.abspath(args.checkpoint), "train_examples": len(train),
               "dev_examples": len(dev), "epochs": args.epochs, "batch_size": args.batch_size,
               "max_seq_len": args.seq_len, "dropout": args.dropout, "seeds": args.seeds,
               "reinit_pooler": args.reinit_pooler,
               "score": "dev accuracy (%) after the last epoch", "results": {}}
    for lr in args.lr:
        per_lr = summary["results"].setdefault(f"{lr:g}", {})
        for seed in args.seeds:
            for arm in args.arms:
                run = os.path.join(args.out, f"{arm}_lr{lr:g}_seed{seed}")
                init = build_init(arm, args.checkpoint, os.path.join(run, "init"), args.dropout, seed,
                                  args.reinit_pooler)
                t = time.time()
                result = finetune("classification", train, dev, init, run, epochs=args.epochs,
                                  batch_size=args.batch_size, learning_rate=lr, max_seq_len=args.seq_len,
                                  seed=seed, verbose=0, overwrite=True)
                per_epoch = [round(h["eval_accuracy"], 2) for h in result["history"]]
                entry = per_lr.setdefault(arm, {"last_epoch": [], "per_epoch": [], "seconds": []})
                entry["last_epoch"].append(per_epoch[-1])
                entry["per_epoch"].append(per_epoch)
                entry["seconds"].append(round(time.time() - t, 1))
                print(json.dumps({"lr": lr, "arm": arm, "seed": seed, "dev_accuracy_per_epoch": per_epoch,
                                  "seconds": entry["seconds"][-1]}), flush=True)
        for entry in per_lr.values():
            entry["mean"] = round(sum(entry["last_epoch"]) / len(entry["last_epoch"]), 2)
        if {"pretrained", "random"} <= per_lr.keys():
            per_lr["gain_points"] = round(per_lr["pretrained"]["mean"] - per_lr["random"]["mean"], 2)
    with open(os.path.join(args.out, "transfer.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
