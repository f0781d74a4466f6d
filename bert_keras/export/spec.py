"""What an export needs to know about a model: task family, labels, inputs, sequence length.

`resolve(model_dir_or_model, ...)` turns a model folder (written by
`save_checkpoint` or `finetune`, or any folder `load_checkpoint` reads) or an
in-memory Keras model into an `ExportSpec`.  The exporters (SavedModel,
TFLite) and `bert-keras predict` all read the same spec, and the spec travels
with every export as JSON (SavedModel: `assets.extra/bert_keras_export.json`;
TFLite: `bert_keras_export.json` next to the files) so a consumer needs nothing
from this project to interpret the outputs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import warnings

from bert_keras.errors import BertKerasError
from bert_keras.task_names import CLASS_HEADS, FINETUNE_TASKS, SERVABLE
from bert_keras.writing import write_json

SPEC_FILE = "bert_keras_export.json"

@dataclasses.dataclass
class ExportSpec:
    """Everything the exporters need besides the Keras model itself.

    Fields:
      task: "classification", "token_classification", "span" or "multiple_choice".
      regression: classification with one output (a score, no labels).
      labels: label names by class index (classification / token
        classification); "0", "1", ... when the folder records none.
      pair: whether the text signature takes a second segment `text_b`
        (always for span and multiple choice).
      max_seq_len: sequence length of the text signature (and of TFLite).
      vocab_path: the WordPiece vocabulary (vocab.txt).
      lower_case: uncased tokenisation.
      num_outputs: classes (classification, token classification); 2 for
        span; 1 for multiple choice.
      source: where the model came from (for messages and the JSON).
    """

    task: str
    regression: bool
    labels: list
    pair: bool
    max_seq_len: int
    vocab_path: str
    lower_case: bool
    num_outputs: int
    source: str = ""

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["vocab_file"] = os.path.basename(d.pop("vocab_path"))
        d["inputs"] = self.text_inputs
        d["outputs"] = self.text_outputs
        return d

    @property
    def text_inputs(self) -> list:
        return ["text", "text_b"] if self.pair else ["text"]

    @property
    def text_outputs(self) -> list:
        """Output names of the text signature (the ids signature has the same minus token_ids)."""
        if self.task == "classification":
            return ["logits", "score"] if self.regression else ["logits", "probabilities", "label"]
        if self.task == "token_classification":
            return ["logits", "probabilities", "label", "token_ids", "padding_mask"]
        if self.task == "span":
            return ["start_logits", "end_logits", "token_ids", "padding_mask"]
        return ["logits", "probabilities", "choice"]


def _model_task(model) -> str:
    from bert_keras.checkpoints import task_of

    task = task_of(model)
    if task not in SERVABLE:
        raise BertKerasError(f"cannot export a {task or 'bare encoder'} model; export a fine-tuned task model "
                             f"({', '.join(SERVABLE)})")
    return task


def _num_outputs(model, task) -> int:
    if task in CLASS_HEADS:
        return int(model.num_classes)
    return 2 if task == "span" else 1


def load_for_export(model_dir):
    """Loads a model folder for export: (keras model, folder metadata dict, raw meta dict)."""
    from bert_keras.checkpoints import checkpoint_metadata, checkpoint_task, load_checkpoint, open_checkpoint

    if not os.path.isdir(model_dir):
        raise BertKerasError(f"{model_dir}: no such model folder")
    raw = open_checkpoint(model_dir)
    # labels, task, max_seq_len as any layout records them (Hugging Face: id2label's names)
    metadata = checkpoint_metadata(raw)
    task = FINETUNE_TASKS.get(metadata.get("task")) or checkpoint_task(model_dir)
    if task not in SERVABLE:
        raise BertKerasError(f"{model_dir}: the folder holds a {task or 'bare encoder'} model; export needs a "
                             f"fine-tuned task model ({', '.join(SERVABLE)})")
    model = load_checkpoint(model_dir, task=task)
    return model, metadata, raw


def weights_bytes(model, bytes_per_weight=None) -> int:
    """The bytes of ``model``'s weights (at ``bytes_per_weight`` each, else their own dtype's size):
    about what an export of it writes, for the message when the disk fills."""
    import numpy as np

    total = 0
    for w in model.weights:
        size = bytes_per_weight or np.dtype(str(w.dtype).replace("bfloat16", "float16")).itemsize
        total += int(np.prod(w.shape)) * size
    return int(total)


def require_tensorflow_backend(what):
    """A one-line error unless Keras runs on TensorFlow here: the exports trace the model
    into TensorFlow graphs."""
    import keras

    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise BertKerasError(
            f"{what} traces the model with TensorFlow, and Keras runs on {backend} in this process: save the "
            "model with bk.save_checkpoint and run `bert-keras export --model-dir DIR --out OUT` (it runs on "
            "TensorFlow whatever KERAS_BACKEND says), or call it with KERAS_BACKEND=tensorflow")


def resolve(model_dir_or_model, max_seq_len=None, pair=None, vocab_path=None, lower_case=None, labels=None):
    """(keras model, ExportSpec) for a model folder or an in-memory task model.

    Args:
      model_dir_or_model: a folder (`save_checkpoint` / `finetune` output, or a
        Hugging Face / Google folder with a task head) or a Keras task model
        (from `load_checkpoint`, which records `vocab_path` and `lower_case`).
      max_seq_len: sequence length of the text signature; default the
        folder's recorded `max_seq_len`, else 128.
      pair: text signature takes `text_b`; default: the folder's `pair`
        record, else True for span / multiple choice, False otherwise.
      vocab_path, lower_case, labels: override what the folder records.
    """
    if isinstance(model_dir_or_model, (str, os.PathLike)):
        source = os.fspath(model_dir_or_model)
        model, metadata, raw = load_for_export(source)
    else:
        model, metadata, raw, source = model_dir_or_model, {}, None, type(model_dir_or_model).__name__
    task = _model_task(model)
    vocab_path = vocab_path or getattr(model, "vocab_path", None) or (raw.vocab_path if raw else None)
    if not vocab_path or not os.path.exists(vocab_path):
        raise BertKerasError(f"{source}: no vocab.txt to build the in-graph tokenizer; pass vocab_path")
    if lower_case is None:
        lower_case = metadata.get("lower_case", getattr(model, "lower_case", None))
    if lower_case is None:
        from bert_keras.checkpoints.casing import checkpoint_casing, resolve_casing

        # the same rule as fine-tuning's tokenizer: Google's folder names, else the vocabulary
        casing = checkpoint_casing(raw) if raw is not None else resolve_casing(vocab_path=vocab_path)
        print(f"{source}: {casing.describe()}", flush=True)
        lower_case = casing.lower_case
    num_outputs = _num_outputs(model, task)
    regression = task == "classification" and (num_outputs == 1 or metadata.get("task") == "regression")
    if labels is None:
        labels = metadata.get("labels")
    if task in CLASS_HEADS and not regression:
        labels = [str(x) for x in labels] if labels else [str(i) for i in range(num_outputs)]
        if len(labels) != num_outputs:
            raise BertKerasError(f"{source}: {len(labels)} label names for a head with {num_outputs} outputs")
    else:
        labels = []
    if pair is None:
        pair = bool(metadata.get("pair", task in ("span", "multiple_choice")))
    if task in ("span", "multiple_choice") and not pair:
        raise BertKerasError(f"{source}: {task} models always take a second text (pair=True)")
    # None means "the folder's"; 0 is a length like any other, and refused below
    seq_len = int(max_seq_len if max_seq_len is not None else (metadata.get("max_seq_len") or 128))
    limit = model.encoder.config.max_position_embeddings
    if not (3 if pair else 2) <= seq_len <= limit:
        raise BertKerasError(f"max_seq_len={seq_len} is outside 3..{limit} for this model")
    spec = ExportSpec(task=task, regression=regression, labels=labels, pair=bool(pair), max_seq_len=seq_len,
                      vocab_path=os.fspath(vocab_path), lower_case=bool(lower_case), num_outputs=num_outputs,
                      source=source)
    return model, spec


def write_spec(spec: ExportSpec, folder, **extra) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, SPEC_FILE)
    write_json(path, {**spec.to_json(), **extra})
    return path


# What the exporters write at the top of their folder: an existing folder is
# replaced only when it holds the export JSON and nothing but these.
SAVED_MODEL_ENTRIES = ("saved_model.pb", "fingerprint.pb", "variables", "assets", "assets.extra", "ids_only")
TFLITE_ENTRIES = (SPEC_FILE, "vocab.txt")


def _export_kind(folder):
    if os.path.isfile(os.path.join(folder, "assets.extra", SPEC_FILE)):
        return "saved_model"
    if os.path.isfile(os.path.join(folder, SPEC_FILE)):
        return "tflite"
    return None


def check_out_dir(out_dir, model_dir, kind) -> None:
    """Refuse an output folder an export must not replace (cheap: call it before writing anything).

    Refused: ``out_dir`` equal to or containing ``model_dir`` (replacing it
    would delete the model being exported), and an existing non-empty
    ``out_dir`` that is not a previous export of the same ``kind``
    ("saved_model" or "tflite") holding only what the exporter writes.

    Raises:
      BertKerasError: naming the folder and the reason, in one line.
    """
    out_dir = os.fspath(out_dir)
    check_not_model_folder(out_dir, model_dir)
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        may_replace_export(kind)(out_dir)


def check_not_model_folder(out_dir, model_dir) -> None:
    """Refuse ``out_dir`` equal to or containing ``model_dir``: replacing it would delete the model."""
    if isinstance(model_dir, (str, os.PathLike)):
        out, src = os.path.realpath(os.fspath(out_dir)), os.path.realpath(os.fspath(model_dir))
        if src == out or src.startswith(out.rstrip(os.sep) + os.sep):
            raise BertKerasError(f"{os.fspath(out_dir)}: the export folder is (or contains) the model folder "
                                 f"{os.fspath(model_dir)}; export to another folder")


def may_replace_export(kind):
    """`atomic_folder`'s ``may_replace`` for an export of ``kind``: accept only a previous export of ours."""
    from bert_keras.writing import foreign_entries

    def check(folder):
        found = _export_kind(folder)
        if found is None:
            raise BertKerasError(f"{folder}: folder exists, is not empty and is not a bert-keras export; "
                                 "refusing to replace it (choose a new or empty folder)")
        if found != kind:
            name = {"saved_model": "SavedModel", "tflite": "TFLite"}
            raise BertKerasError(f"{folder}: holds a bert-keras {name[found]} export; refusing to replace it "
                                 f"with a {name[kind]} export")
        if kind == "saved_model":
            foreign = foreign_entries(folder, SAVED_MODEL_ENTRIES)
        else:
            foreign = foreign_entries(folder, TFLITE_ENTRIES, patterns=("*.tflite",))
        if foreign:
            raise BertKerasError(f"{folder}: a bert-keras export that also holds {foreign[0]!r}, which the "
                                 "exporter did not write; refusing to replace it")

    return check


def read_spec(path) -> dict:
    """The export JSON of a SavedModel folder or a TFLite folder/file ({} when absent)."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    for candidate in (os.path.join(folder, "assets.extra", SPEC_FILE), os.path.join(folder, SPEC_FILE)):
        if os.path.exists(candidate):
            with open(candidate, encoding="utf-8") as f:
                return json.load(f)
    return {}


def keep_other_variants(previous, new) -> None:
    """TFLite: carry the previous export's other .tflite files (other quantisations) into the new folder.

    The folder is replaced as a whole, so files this call does not write
    survive only when copied; they are kept when the previous export JSON
    equals the new one (same model source, labels, lengths, inputs), and
    dropped with a warning otherwise (the new JSON would misdescribe them).
    """
    if not os.path.isfile(os.path.join(previous, SPEC_FILE)):
        return
    others = sorted(n for n in os.listdir(previous)
                    if n.endswith(".tflite") and not os.path.exists(os.path.join(new, n)))
    if not others:
        return
    if read_spec(previous) != read_spec(new):
        warnings.warn(f"{previous}: {', '.join(others)} were exported with other settings and are not kept",
                      stacklevel=3)
        return
    for name in others:
        try:  # a hard link: the previous folder is deleted after the swap, the file stays
            os.link(os.path.join(previous, name), os.path.join(new, name))
        except OSError:
            shutil.copyfile(os.path.join(previous, name), os.path.join(new, name))
