"""Convert a checkpoint between Google TF1, Hugging Face, keras-hub and bert-keras layouts.

The source layout is detected (Hugging Face config.json + model.safetensors or
pytorch_model.bin; Google bert_config.json + bert_model.ckpt.*; a keras-hub
preset; a bert-keras folder).  Heads in the source (MLM/NSP, classifier, span) are kept unless --task
says otherwise.  What the source records besides its weights (task, label
names, max_seq_len, casing, any other metadata `finetune` wrote) is carried
into the output: Hugging Face's config.json id2label/label2id hold the label
names, tokenizer_config.json the casing, and config.json's bert_keras_metadata
(bert_config.json's for Google) the rest; one line lists what was kept and
another anything that could not be.

Outputs are checked: the converted folder is loaded back and its outputs
compared with the source model's on a random batch (and its metadata with what
was written).  A Hugging Face output is also loaded with transformers (when it
and torch are installed) and transformers' outputs compared with ours; a keras-hub preset's weights are
compared with the source's and loaded with keras-hub's own BertBackbone /
BertTextClassifier (when keras-hub is installed), whose outputs are compared
with ours (keras-hub computes GELU with the tanh approximation, as Google's
original code did: a preset read here does too).
--no-verify skips all of that.  --to must be a new (or empty) folder: an
existing file or non-empty folder is refused, nothing is overwritten.

examples:
  bert-keras convert --from uncased_L-12_H-768_A-12 --to bert-base-hf --format huggingface
  bert-keras convert --from hf_folder --to ours --format bert_keras --task pretraining
  bert-keras convert --from runs/sst/best --to sst-hf --format huggingface
  bert-keras convert --from ours --to google_ckpt --format google
  bert-keras convert --from runs/sst/best --to sst-preset --format keras_hub
"""

import json
import os

from bert_keras.task_names import MODEL_TASKS

FORMATS = ("bert_keras", "huggingface", "google", "keras_hub")
TASK_CHOICES = ("auto", "encoder") + MODEL_TASKS

# Reloading with this project: the same float32 weights through the same model, measured 0.0
# for every layout and task; the bound allows a different kernel order.
OURS_TOLERANCE = 1e-5
# transformers (torch) against ours on the same folder, float32 on CPU, max |difference| over
# the outputs relative to the largest |output| (at least 1): measured 2.0e-6 / 5.66 = 3.6e-7
# (all-MiniLM-L6-v2, BertModel), 6.7e-6 / 14.2 = 4.7e-7 (rxnfp, BertForPreTraining MLM logits),
# 2.9e-6 / 7.12 = 4.0e-7 (rxnfp, BertForSequenceClassification), 4.2e-7 / 1 (MiniLM with a new
# span head), 9.5e-7 / 3.44 = 2.8e-7 (a tiny L2/H128 encoder); bounded at about 10x the largest.
TRANSFORMERS_TOLERANCE = 5e-6


def add_arguments(p):
    p.add_argument("--from", dest="source", required=True, help="checkpoint folder (or Google ckpt prefix)")
    p.add_argument("--to", dest="out", required=True,
                   help="output folder (created; an existing file or non-empty folder is refused)")
    p.add_argument("--format", choices=FORMATS, default="bert_keras", help="output layout (default: bert_keras)")
    p.add_argument("--task", choices=TASK_CHOICES, default="auto",
                   help="which heads to convert (default: whatever the source holds)")
    p.add_argument("--vocab", help="vocab.txt to include (default: the source folder's)")
    p.add_argument("--no-verify", action="store_true",
                   help="skip loading the result back (and into transformers) to compare outputs")


def _carried(raw, source_task, task, model, vocab):
    """(metadata to write, lower_case to write, description of what is kept, of what is not)."""
    from bert_keras.checkpoints import checkpoint_metadata, recorded_casing
    from bert_keras.task_names import CLASS_HEADS

    metadata = checkpoint_metadata(raw)
    dropped = []
    if task != source_task:
        # the fine-tuning record describes the source's head, which the output does not have
        gone = [k for k in ("task", "labels") if k in metadata]
        for key in gone:
            del metadata[key]
        if gone:
            dropped.append(f"{', '.join(gone)} (the output has no {source_task or 'task'} head)")
    labels = metadata.get("labels")
    if task in CLASS_HEADS and isinstance(labels, list) and len(labels) != model.num_classes:
        dropped.append(f"labels ({len(labels)} names for a head with {model.num_classes} classes)")
        del metadata["labels"]
    casing = recorded_casing(raw, vocab)
    kept = [f"{k}={metadata[k]!r}" for k in sorted(metadata) if k != "lower_case"]
    if casing is not None:
        kept.append(f"lower_case={casing.lower_case} ({casing.reason})")
    return metadata, (casing.lower_case if casing else None), kept, dropped


def run(args) -> int:
    from bert_keras.checkpoints import checkpoint_task, load_checkpoint, open_checkpoint, save_checkpoint
    from bert_keras.errors import BertKerasError

    # before any work, and never over what is there: a conversion is cheap to redo elsewhere
    if os.path.lexists(args.out) and not os.path.isdir(args.out):
        raise BertKerasError(f"{args.out}: --to exists and is a file; choose a new folder")
    if os.path.isdir(args.out) and os.listdir(args.out):
        raise BertKerasError(f"{args.out}: --to exists and is not empty; choose a new folder")
    raw = open_checkpoint(args.source)
    source_task = checkpoint_task(args.source)
    task = source_task if args.task == "auto" else args.task
    task = None if task == "encoder" else task
    if args.format == "keras_hub" and task not in (None, "classification"):
        raise BertKerasError(f"{args.source}: keras-hub has no BERT {task} task (its presets hold a BertBackbone "
                             "or a BertTextClassifier); --task encoder writes the encoder alone")
    model = load_checkpoint(args.source, task=task)
    if args.vocab and not os.path.exists(args.vocab):
        raise BertKerasError(f"vocabulary not found: {args.vocab}")
    metadata, lower_case, kept, dropped = _carried(raw, source_task, task, model, args.vocab)
    save_checkpoint(model, args.out, vocab_path=args.vocab, flavor=args.format, lower_case=lower_case,
                    metadata=metadata)
    print(f"wrote {args.format} checkpoint ({task or 'encoder'}) to {args.out}")
    print(f"kept: {', '.join(kept) if kept else 'nothing recorded besides config and weights'}")
    if dropped:
        print(f"not carried: {'; '.join(dropped)}")
    if args.no_verify:
        return 0
    verify(model, args.out, metadata, lower_case)
    return 0


def _random_batch(model):
    import numpy as np

    from bert_keras.checkpoints import task_of

    task = task_of(model)
    rng = np.random.default_rng(0)
    cfg = model.encoder.config if task else model.config
    x = {"token_ids": rng.integers(0, cfg.vocab_size, (2, 16)).astype("int32"),
         "segment_ids": np.zeros((2, 16), "int32"), "padding_mask": np.ones((2, 16), "int32")}
    if task == "pretraining":
        x["masked_positions"] = np.array([[1, 2], [3, 4]], "int32")
    if task == "multiple_choice":
        x = {k: v[:, None] for k, v in x.items()}
    return x


def _numpy(outputs):
    import keras

    return [keras.ops.convert_to_numpy(t) for t in keras.tree.flatten(outputs)]


def verify(model, out, metadata=None, lower_case=None) -> float:
    """Load ``out`` back and compare it with ``model`` (and, for a Hugging Face folder, with
    transformers when it is installed); raise `BertKerasError` naming the folder and the
    difference.  Returns our reload's max |difference|."""
    import numpy as np

    from bert_keras.checkpoints import checkpoint_metadata, load_checkpoint, open_checkpoint, task_of
    from bert_keras.errors import BertKerasError

    task = task_of(model)
    back = load_checkpoint(out, task=task)
    x = _random_batch(model)
    raw = open_checkpoint(out)
    if raw.layout == "keras_hub":  # keras-hub computes its own GELU: weights compared, then keras-hub itself
        _check_with_keras_hub(model, back, out, x)
        model = back
    ours = _numpy(model(x))
    diff = max(float(np.abs(a - b).max()) for a, b in zip(ours, _numpy(back(x))))
    print(f"verified: max |difference| of outputs after reloading = {diff:.2e}")
    if diff > OURS_TOLERANCE:
        raise BertKerasError(f"{out}: converted checkpoint differs from the source by {diff:.2e}")
    if metadata is not None:
        _check_metadata(out, metadata, checkpoint_metadata(raw))
    if lower_case is not None:
        from bert_keras.checkpoints import recorded_casing

        casing = recorded_casing(raw)
        if casing is None or casing.lower_case != lower_case:
            raise BertKerasError(f"{out}: lower_case {lower_case} was written but "
                                 f"{casing.describe() if casing else 'no casing'} is read back")
    if raw.flavor == "hf" and raw.layout == "hf":
        _check_with_transformers(model, out, x)
    return diff


def _check_with_keras_hub(model, back, out, x):
    """The preset's weights are the model's, and keras-hub's own loader computes what ours does."""
    import numpy as np

    from bert_keras.checkpoints import model_variables, task_of
    from bert_keras.errors import BertKerasError

    theirs, ours = model_variables(back), model_variables(model)
    diff = max(float(np.abs(theirs[k].numpy() - ours[k].numpy()).max()) for k in ours)
    if diff > 0:
        raise BertKerasError(f"{out}: the preset's weights differ from the source's by {diff:.2e}")
    try:
        import keras_hub
    except ImportError:
        print("not checked with keras-hub: it is not installed")
        return
    cls = keras_hub.models.BertTextClassifier if task_of(model) == "classification" else keras_hub.models.BertBackbone
    kh = cls.from_preset(out, **({"preprocessor": None} if cls is keras_hub.models.BertTextClassifier else {}))
    kh_diff = max(float(np.abs(a - b).max()) for a, b in zip(_numpy(kh(x)), _numpy(back(x))))
    print(f"verified: weights equal; keras-hub's {cls.__name__} loads it, max |difference| = {kh_diff:.2e}")
    if kh_diff > OURS_TOLERANCE:
        raise BertKerasError(f"{out}: keras-hub's {cls.__name__} computes outputs {kh_diff:.2e} away from ours")


def _check_metadata(out, written, read):
    from bert_keras.errors import BertKerasError

    def normal(values):
        values = json.loads(json.dumps(values))  # tuples -> lists, as a JSON file gives them
        if isinstance(values.get("labels"), list):
            values["labels"] = [str(x) for x in values["labels"]]
        return values

    written, read = normal(written), normal(read)
    for key in sorted(set(written) | set(read)):
        if written.get(key, "<absent>") != read.get(key, "<absent>"):
            raise BertKerasError(f"{out}: metadata field {key!r} was written as {written.get(key, '<absent>')!r} "
                                 f"but reads back as {read.get(key, '<absent>')!r}")


def _check_with_transformers(model, out, x):
    """Load the Hugging Face folder with transformers' BertModel / BertFor* class and compare."""
    import numpy as np

    from bert_keras.checkpoints import task_of
    from bert_keras.errors import BertKerasError
    from bert_keras.task_names import HF_ARCHITECTURES

    try:
        import torch
        import transformers
    except ImportError:
        print("not checked with transformers: transformers and torch are not both installed")
        return None

    task = task_of(model)
    name = HF_ARCHITECTURES[task]
    verbosity = transformers.logging.get_verbosity()
    bar = transformers.logging.is_progress_bar_enabled()
    # its load report and progress bar: the outputs, compared below, say whether every weight arrived
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    try:
        hf = getattr(transformers, name).from_pretrained(out).eval()
    except Exception as e:  # noqa: BLE001 - transformers raises many types for a folder it cannot read
        text = str(e).strip().splitlines()
        raise BertKerasError(f"{out}: transformers' {name} cannot load the folder "
                             f"({text[0] if text else type(e).__name__})") from None
    finally:
        transformers.logging.set_verbosity(verbosity)
        if bar:
            transformers.logging.enable_progress_bar()
    inputs = {"input_ids": torch.tensor(x["token_ids"], dtype=torch.long),
              "token_type_ids": torch.tensor(x["segment_ids"], dtype=torch.long),
              "attention_mask": torch.tensor(x["padding_mask"], dtype=torch.long)}
    with torch.no_grad():
        r = hf(**inputs)
    y = model(x)
    if task is None:
        pairs = [(y["sequence_output"], r.last_hidden_state), (y["pooled_output"], r.pooler_output)]
    elif task == "pretraining":
        positions = torch.tensor(x["masked_positions"], dtype=torch.long)
        mlm = torch.take_along_dim(r.prediction_logits, positions[..., None], dim=1)
        pairs = [(y["mlm_logits"], mlm), (y["nsp_logits"], r.seq_relationship_logits)]
    elif task == "span":
        pairs = [(y["start_logits"], r.start_logits), (y["end_logits"], r.end_logits)]
    else:
        pairs = [(y, r.logits)]
    ours = _numpy([a for a, _ in pairs])
    theirs = [t.numpy() for _, t in pairs]
    if [a.shape for a in ours] != [t.shape for t in theirs]:
        raise BertKerasError(f"{out}: transformers' {name} gives outputs of shapes "
                             f"{[list(t.shape) for t in theirs]}, ours {[list(a.shape) for a in ours]}")
    diff = max(float(np.abs(a - t).max()) for a, t in zip(ours, theirs))
    # float32 rounding grows with the outputs' size (MLM logits reach tens): bound relative to it
    scale = max([1.0] + [float(np.abs(t).max()) for t in theirs])
    print(f"verified with transformers {name}: max |difference| of outputs = {diff:.2e} "
          f"(largest |output| {scale:.3g})")
    if not diff <= TRANSFORMERS_TOLERANCE * scale:
        raise BertKerasError(f"{out}: transformers' {name} differs from the source by {diff:.2e} "
                             f"(bound {TRANSFORMERS_TOLERANCE:.0e} x largest |output| {scale:.3g})")
    return diff
