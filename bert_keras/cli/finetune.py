"""Fine-tune a pre-trained checkpoint on a task and keep the best epoch.

Tasks and their files: classification/regression (generic CSV/TSV/JSONL with
text, text_b, label columns, or a GLUE TSV with --glue-task), ner (CoNLL/BIO
token-per-line), squad / squad2 (SQuAD v1.1 / v2.0 JSON), multiple-choice
(SWAG CSV).  Writes MODEL_DIR/best/ (loadable by load_checkpoint and
`bert-keras export`), MODEL_DIR/eval_results.json (percentages) and
MODEL_DIR/history.json.

A previous run's results never look current: a non-empty MODEL_DIR is refused
unless --overwrite, which first removes the previous best/, eval_results.json
and history.json (nothing else), so a run that dies early leaves none of them.

examples:
  bert-keras finetune --task classification --init minilm/ --train train.csv --eval dev.csv \\
      --model-dir runs/sentiment --epochs 1 --batch-size 32 --learning-rate 5e-5
  bert-keras finetune --task classification --glue-task sst-2 --init bert-base/ \\
      --train SST-2/train.tsv --eval SST-2/dev.tsv --model-dir runs/sst2
  bert-keras finetune --task ner --init bert-base-cased/ --train train.conll --eval dev.conll --model-dir runs/ner
  bert-keras finetune --task squad --init bert-base/ --train train-v1.1.json --eval dev-v1.1.json \\
      --model-dir runs/squad --max-seq-len 384 --epochs 2 --learning-rate 3e-5
"""

import json

from bert_keras.choices import MIXED_PRECISION
from bert_keras.cli._task_data import add_casing_arguments, add_data_arguments, read_task_file


def add_arguments(p):
    from bert_keras.finetuning import TASKS

    p.add_argument("--task", required=True, choices=TASKS)
    p.add_argument("--init", required=True, help="checkpoint folder: Hugging Face, Google or bert-keras")
    p.add_argument("--train", required=True, help="training file")
    p.add_argument("--eval", help="evaluation file (the best epoch on it is kept)")
    p.add_argument("--model-dir", required=True, help="output folder (new or empty, unless --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="reuse a non-empty --model-dir: first remove a previous run's best/, eval_results.json "
                        "and history.json (other files are kept)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--max-seq-len", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--warmup-fraction", type=float, default=0.1)
    p.add_argument("--mixed-precision", choices=tuple(MIXED_PRECISION), default="none")
    add_casing_arguments(p)
    add_data_arguments(p)


def run(args) -> int:
    from bert_keras.finetuning import check_hyperparameters, finetune

    check_hyperparameters(epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate,
                          max_seq_len=args.max_seq_len, weight_decay=args.weight_decay,
                          warmup_fraction=args.warmup_fraction)  # before any file is read
    train, _ = read_task_file(args.task, args.train, args, training=True)
    dev, dev_data = read_task_file(args.task, args.eval, args, training=False) if args.eval else (None, None)
    for name, examples in (("train", train), ("eval", dev)):
        skipped = getattr(examples, "skipped", 0)
        if skipped:
            print(f"{name}: skipped {skipped} records (as the official scripts do)")
    result = finetune(args.task, train, dev, args.init, args.model_dir, epochs=args.epochs,
                      batch_size=args.batch_size, learning_rate=args.learning_rate, max_seq_len=args.max_seq_len,
                      seed=args.seed, weight_decay=args.weight_decay, warmup_fraction=args.warmup_fraction,
                      mixed_precision=args.mixed_precision, lower_case=args.lower_case,
                      dev_dataset=dev_data, doc_stride=args.doc_stride, max_query_length=args.max_query_length,
                      overwrite=args.overwrite)
    result.pop("model")
    result.pop("history")
    print(json.dumps(result, indent=2))
    return 0
