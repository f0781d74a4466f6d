"""Evaluate a fine-tuned model folder (MODEL_DIR/best from `finetune`) on a labelled file.

The task, labels, casing and sequence length come from the folder.  Prints the
metrics as JSON (percentages) and writes them to --output when given.  A score that
is not finite (a model whose weights went NaN) is null, listed under "not_finite".
--output may replace a previous metrics file, never the evaluation file, a file in a
model folder or another file.

examples:
  bert-keras evaluate --model-dir runs/sentiment/best --eval dev.csv
  bert-keras evaluate --model-dir runs/squad/best --eval dev-v1.1.json --output squad_dev.json
"""

import contextlib
import json
import math
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


def _finite(scores):
    """The scores as valid JSON: a NaN or infinite score (a model or labels gone non-finite) becomes
    null, and "not_finite" lists which (dotted for nested scores), so that it never reads as a number."""
    bad = []

    def clean(value, name):
        if isinstance(value, dict):
            return {k: clean(v, f"{name}.{k}" if name else k) for k, v in value.items()}
        if isinstance(value, float) and not math.isfinite(value):
            bad.append(name)
            return None
        return value

    cleaned = clean(scores, "")
    return {**cleaned, "not_finite": bad} if bad else cleaned


def run(args) -> int:
    from bert_keras.errors import BertKerasError
    from bert_keras.output_files import check_output_file
    from bert_keras.locks import single_writer

    if args.batch_size < 1:
        raise BertKerasError(f"--batch-size must be >= 1, got {args.batch_size}")
    check_output_file(args.output, "metrics", [("--eval", args.eval), ("--model-dir", args.model_dir)])
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
                      doc_stride=args.doc_stride, max_query_length=args.max_query_length, lower_case=args.lower_case,
                      progress=True)
    text = json.dumps(_finite(scores), indent=2, allow_nan=False)
    print(text)
    if args.output:
        from bert_keras.writing import write_text

        write_text(args.output, text + "\n")
    return 0
