"""Real NER result: all-MiniLM-L6-v2 fine-tuned on WNUT-16 (Twitter NER, 10 entity types).

Split: `bert_keras.samples.wnut16_split(seed=0)` (1,915 train / 479 dev sentences).  The
first sub-token of each word carries its BIO tag, the others are ignored in the loss; dev
predictions are mapped back to words and scored at entity level, then re-scored with
`seqeval` itself to check the number.  MiniLM is small and WNUT-16's entities are rare:
with 3 epochs at 5e-5 (180 steps) it still predicts "O" everywhere (entity F1 1.8), hence
the defaults below (8 epochs, batch 16, 1e-4: 960 steps).

    python training/finetune/wnut16_ner.py --out runs/wnut16   # 8 epochs, batch 16, lr 1e-4
"""

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--mixed-precision", default="none", choices=("none", "bf16", "fp16"))
    p.add_argument("--out", default="runs/wnut16")
    args = p.parse_args()

    import numpy as np

    from bert_keras import finetuning, samples, tasks
    from bert_keras.checkpoints import load_checkpoint, open_checkpoint

    train, dev = samples.wnut16_split(seed=0)
    result = finetuning.finetune("ner", train, dev, str(samples.fetch("minilm")), args.out, epochs=args.epochs,
                                 batch_size=args.batch_size, learning_rate=args.learning_rate,
                                 mixed_precision=args.mixed_precision, verbose=2, overwrite=True)
    best = result["best_checkpoint"]
    labels = tasks.LabelMap(open_checkpoint(best).meta["metadata"]["labels"])
    model = load_checkpoint(best, task="token_classification")
    feats = tasks.featurize_token_classification(dev, finetuning.checkpoint_tokenizer(best), labels, 128)
    words = tasks.words_from_predictions(np.argmax(finetuning.predict(model, feats.inputs), -1), feats, labels)
    try:
        from seqeval.metrics import f1_score

        result["seqeval_f1"] = 100 * f1_score([s.tags for s in dev], words)
    except ImportError:
        result["seqeval_f1"] = None
    summary = {k: v for k, v in result.items() if k not in ("model", "history")}
    print(json.dumps(summary, indent=2))
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
