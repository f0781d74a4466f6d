"""Reading task files for `finetune` and `evaluate` (shared by both commands)."""

from bert_keras.errors import DataError
from bert_keras.utils import read_json


def add_data_arguments(p):
    p.add_argument("--glue-task", help="read --train/--eval as this GLUE task's TSV (sst-2, cola, mrpc, qqp, "
                                      "sts-b, mnli, qnli, rte, wnli); default: generic CSV/TSV/JSONL")
    p.add_argument("--text-field", help="generic files: the text column (default: text, else GLUE's sentence, "
                                        "sentence1, question1, premise, question, ...)")
    p.add_argument("--text-b-field", help="generic files: the second text column (default: text_b, else the "
                                          "GLUE partner of the text column: sentence2, question2, hypothesis, ...)")
    p.add_argument("--label-field", help="generic files: the label column (default: label, else gold_label, "
                                         "is_duplicate, Quality, score)")
    p.add_argument("--doc-stride", type=int, default=128, help="SQuAD: window stride (default 128)")
    p.add_argument("--max-query-length", type=int, default=64, help="SQuAD: question tokens kept (default 64)")
    p.add_argument("--first-answer-only", action="store_true",
                   help="SQuAD: train on files whose questions list several answers, using the first")


CHECKPOINT_CASING = ("what the checkpoint records, else inferred from Google's folder name or the "
                     "vocabulary; the choice is printed")


def add_casing_arguments(p, default=CHECKPOINT_CASING):
    """--cased / --uncased -> args.lower_case (None: the casing recorded or inferred, as
    `default` tells the user)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--cased", dest="lower_case", action="store_false", default=None,
                   help=f"tokenize without lower-casing (default: {default})")
    g.add_argument("--uncased", dest="lower_case", action="store_true", default=None,
                   help="lower-case and strip accents before WordPiece")


def read_task_file(task, path, args, training, announce=None):
    """Examples of ``task`` in ``path``; SQuAD also returns the parsed JSON for the metrics.

    `announce`: where the line naming the columns of a generic file goes
    (default stdout; `evaluate` passes stderr, its stdout being the metrics).
    """
    import sys

    from bert_keras import tasks

    if task in ("classification", "regression"):
        if args.glue_task:
            return tasks.read_glue(args.glue_task, path), None
        examples = tasks.read_examples(path, args.text_field, args.text_b_field, args.label_field)
        # which columns were read, so that a guessed column is never a silent choice
        print(tasks.describe_columns(path, examples), file=announce or sys.stdout)
        return examples, None
    if task == "ner":
        return tasks.read_conll(path), None
    if task in ("squad", "squad2"):
        data = read_json(path, DataError)
        version = "2.0" if task == "squad2" else "1.1"
        # SQuAD dev files list several reference answers; training uses the first (as Google does).
        return tasks.read_squad(data, is_training=training, version=version,
                                first_answer_only=training and args.first_answer_only), data
    return tasks.read_swag(path), None
