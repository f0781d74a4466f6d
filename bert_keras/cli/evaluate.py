"""Evaluate a fine-tuned model folder (MODEL_DIR/best from `finetune`) on a labelled file.

The task, labels, casing and sequence length come from the folder.  Prints the
metrics as JSON (percentages) and writes them to --output when given.

examples:
  bert-keras evaluate --model-dir runs/sentiment/best --eval dev.csv
  bert-keras evaluate --model-dir runs/squad/best --eval dev-v1.1.json --output squad_dev.json
"""

import contextlib
import json
import sys

from bert_keras.cli._task_data import add_casing_arguments, add_data_arguments, read_task_file


def add_arguments(p):
    from bert_keras.finetuning import TASKS

    p.add_argument("--model-dir", required=True, help="a folder written by finetune (e.g. runs/x/best)")
    p.add_argument("--eval", required=True, help="labelled evaluation file")
    p.add_argument("--task", choices=TASKS, help="default: the task recorded in the folder")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--output", help="also write the metrics JSON here")
    add_casing_arguments(p)
    add_data_arguments(p)


def run(args) -> int:
    from bert_keras.writing import single_writer

    with single_writer(args.output) if args.output else contextlib.nullcontext():
        return _evaluate(args)


def _evaluate(args):
    from bert_keras.checkpoints import open_checkpoint
    from bert_keras.finetuning import evaluate

    from bert_keras.errors import BertKerasError

    raw = open_checkpoint(args.model_dir)
    task = args.task or ((raw.meta.get("metadata") or {}).get("task") if raw.flavor == "bert_keras" else None)
    if task is None:
        raise BertKerasError(f"{args.model_dir}: no task recorded in the folder; pass --task")
    examples, data = read_task_file(task, args.eval, args, training=False, announce=sys.stderr)
    scores = evaluate(args.model_dir, examples, task=task, batch_size=args.batch_size, dev_dataset=data,
                      doc_stride=args.doc_stride, max_query_length=args.max_query_length, lower_case=args.lower_case)
    text = json.dumps(scores, indent=2)
    print(text)
    if args.output:
        from bert_keras.writing import write_text

        write_text(args.output, text + "\n")
    return 0
