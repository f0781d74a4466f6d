"""Sentence and sentence-pair classification/regression data (GLUE and generic files).

Readers return `ExampleList`s of `InputExample` (`read_glue` here, the generic
`read_examples` in `bert_keras.tasks.files`); `featurize_classification` turns
them into int32 arrays for the encoder.

    from bert_keras.tasks import read_glue, featurize_classification, glue_label_map
    train = read_glue("mrpc", "glue/MRPC/train.tsv")
    feats = featurize_classification(train, tokenizer, max_seq_len=128,
                                     label_map=glue_label_map("mrpc"))
    feats.inputs["token_ids"].shape   # (3668, 128) int32
    feats.labels.shape                # (3668,) int32

GLUE file layouts (the tab-separated files of the GLUE benchmark download):

| task | header | text_a | text_b | label |
| --- | --- | --- | --- | --- |
| CoLA | none (test: `index sentence`) | column 4 | - | column 2 (0/1) |
| SST-2 | `sentence label` | sentence | - | label (0/1) |
| MRPC | `Quality #1 ID #2 ID #1 String #2 String` | #1 String | #2 String | Quality (0/1) |
| QQP | `id qid1 qid2 question1 question2 is_duplicate` | question1 | question2 | is_duplicate (0/1) |
| STS-B | `index genre filename year old_index source1 source2 sentence1 sentence2 score` | sentence1 | sentence2 | score (float 0-5) |
| MNLI | `index promptID pairID genre ... sentence1 sentence2 [label1..] gold_label` | sentence1 | sentence2 | gold_label (contradiction/entailment/neutral) |
| QNLI | `index question sentence label` | question | sentence | label (entailment/not_entailment) |
| RTE | `index sentence1 sentence2 label` | sentence1 | sentence2 | label (entailment/not_entailment) |
| WNLI | `index sentence1 sentence2 label` | sentence1 | sentence2 | label (0/1) |

Test files lack the label column and give `label=None`.  Fields are split on
tabs with no quote processing (Google's readers use `quotechar=None`).
"""

from __future__ import annotations

import dataclasses
import math
import pathlib

import numpy as np

from bert_keras.errors import DataError
from bert_keras.tasks.common import (ExampleList, LabelMap, pack_rows, special_ids, text_lines,
                                     token_ids)


@dataclasses.dataclass
class InputExample:
    """One classification example.

    Attributes:
      text_a: first (or only) text.
      text_b: second text of a pair task, or None.
      label: label string (classification), float (regression) or None (unlabelled).
      guid: the row's id (the file's index column when it has one, else "file:line").
      source: "file:line", used in error messages.
    """

    text_a: str
    text_b: str | None = None
    label: object = None
    guid: str | None = None
    source: str = ""


@dataclasses.dataclass(frozen=True)
class GlueTask:
    name: str
    labels: tuple | None  # None: regression
    text_a: str | int
    text_b: str | int | None
    label: str | int
    has_header: bool = True
    skip_malformed: bool = False  # QQP: rows with missing fields are dropped, as in the usual readers
    test_text_a: str | None = None
    test_text_b: str | None = None


GLUE_TASKS = {
    t.name: t
    for t in [
        GlueTask("cola", ("0", "1"), 3, None, 1, has_header=False, test_text_a="sentence"),
        GlueTask("sst-2", ("0", "1"), "sentence", None, "label"),
        GlueTask("mrpc", ("0", "1"), "#1 String", "#2 String", "Quality"),
        GlueTask("qqp", ("0", "1"), "question1", "question2", "is_duplicate",
                 skip_malformed=True),
        GlueTask("sts-b", None, "sentence1", "sentence2", "score"),
        GlueTask("mnli", ("contradiction", "entailment", "neutral"), "sentence1", "sentence2",
                 "gold_label"),
        GlueTask("qnli", ("entailment", "not_entailment"), "question", "sentence", "label"),
        GlueTask("rte", ("entailment", "not_entailment"), "sentence1", "sentence2", "label"),
        GlueTask("wnli", ("0", "1"), "sentence1", "sentence2", "label"),
    ]
}
_ALIASES = {"sst2": "sst-2", "sst": "sst-2", "stsb": "sts-b", "sts": "sts-b",
            "mnli-m": "mnli", "mnli-mm": "mnli", "mnli_matched": "mnli",
            "mnli_mismatched": "mnli"}


def glue_task(name):
    """The `GlueTask` for a name like "MRPC", "sst2", "STS-B" (case-insensitive)."""
    key = str(name).lower()
    key = _ALIASES.get(key, key)
    if key not in GLUE_TASKS:
        raise DataError(f"unknown GLUE task {name!r}; known: {', '.join(GLUE_TASKS)}")
    return GLUE_TASKS[key]


def glue_label_map(name):
    """The label set of a GLUE classification task (None for STS-B regression)."""
    task = glue_task(name)
    return LabelMap(task.labels) if task.labels else None


def _tsv_rows(path):
    path = pathlib.Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    # text_lines drops the byte-order mark MRPC's files start with
    for n, line in text_lines(path):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        yield n, line.split("\t")


def read_glue(task, path):
    """Reads one GLUE TSV file (train, dev, dev_matched/mismatched or test).

    Args:
      task: task name ("cola", "sst-2", "mrpc", "qqp", "sts-b", "mnli", "qnli",
        "rte", "wnli"; case and "-" optional).
      path: the .tsv file.

    Returns:
      ExampleList of InputExample; labels are validated against the task's
      label set (STS-B: float).  `skipped` counts QQP rows with missing fields.

    Raises:
      DataError naming the file, line and field for a short row, an empty
      text, an unknown label or a non-numeric score.
    """
    spec = glue_task(task)
    path = pathlib.Path(path)
    examples = ExampleList()
    rows = _tsv_rows(path)
    first = next(rows, None)
    if first is None:
        return examples
    columns = None
    # CoLA train/dev have no header; its test file has `index<TAB>sentence`
    if spec.has_header or first[1][:2] == ["index", "sentence"]:
        columns = first[1]
    else:
        rows = _chain([first], rows)
    (ia, ib, il), id_col, names = _glue_columns(spec, columns, path)

    needed = max(i for i in (ia, ib, il) if i is not None) + 1
    for n, fields in rows:
        where = f"{path}:{n}"
        try:
            if len(fields) < needed:
                raise _Malformed(f"{where}: {len(fields)} fields, expected {needed}",
                                 f"{where}: expected at least {needed} tab-separated fields, got {len(fields)}")
            text_a = fields[ia]
            text_b = fields[ib] if ib is not None else None
            empty = [name for name, t in ((names[0], text_a), (names[1], text_b))
                     if t is not None and not t.strip()]
            if empty:
                raise _Malformed(f"{where}: field {empty[0]!r} is empty")
            label = _glue_label(spec, fields[il].strip(), where, names[2]) if il is not None else None
        except _Malformed as e:
            if not spec.skip_malformed:
                raise DataError(e.message) from None
            examples.skip(e.reason)
            continue
        guid = fields[id_col] if id_col is not None else f"{path.name}:{n}"
        examples.append(InputExample(text_a, text_b, label, guid, where))
    return examples


class _Malformed(Exception):
    """A row the task's reader skips (QQP) or refuses: reason counted, message raised."""

    def __init__(self, reason, message=None):
        super().__init__(reason)
        self.reason, self.message = reason, message or reason


def _glue_columns(spec, columns, path):
    """((text_a, text_b, label) column indexes, id column, their names for messages);
    None for a column the file does not have (label: a test file)."""
    def locate(field):
        if field is None:
            return None
        if isinstance(field, int):
            return field
        if field not in columns:
            return -1
        # MNLI's dev files hold label1..label5 then gold_label: take the named one
        return columns.index(field)

    if columns is not None and not isinstance(spec.text_a, int):
        ia, ib, il = locate(spec.text_a), locate(spec.text_b), locate(spec.label)
        if ia < 0:
            raise DataError(f"{path}:1: header has no column {spec.text_a!r} for GLUE task "
                            f"{spec.name} (header: {columns})")
        if ib is not None and ib < 0:
            raise DataError(f"{path}:1: header has no column {spec.text_b!r} for GLUE task "
                            f"{spec.name} (header: {columns})")
        if il < 0:
            il = None  # a test file: no labels
        id_col = columns.index("index") if "index" in columns else (
            columns.index("id") if "id" in columns else None)
        return (ia, ib, il), id_col, (spec.text_a, spec.text_b, spec.label)
    if columns is not None:  # CoLA test
        return (columns.index(spec.test_text_a), None, None), columns.index("index"), (spec.test_text_a, None, None)
    ia, il = spec.text_a, spec.label
    return (ia, spec.text_b, il), None, (f"column {ia + 1} (sentence)", None, f"column {il + 1} (label)")


def _glue_label(spec, raw, where, name):
    """A row's label: float for STS-B, else one of the task's labels (`_Malformed` if not)."""
    if spec.labels is None:
        try:
            value = float(raw)
        except ValueError:
            raise DataError(f"{where}: field {name!r}: not a number: {raw!r}") from None
        if not math.isfinite(value):
            raise DataError(f"{where}: field {name!r}: not a finite number: {raw!r}")
        return value
    if raw not in spec.labels:
        raise _Malformed(f"{where}: field {name!r}: bad label {raw!r}",
                         f"{where}: field {name!r}: {raw!r} is not in the label set {list(spec.labels)}")
    return raw


def _chain(first, rest):
    yield from first
    yield from rest


# ----------------------------------------------------------------------------
# Features


@dataclasses.dataclass
class Features:
    """Model-ready arrays.

    Attributes:
      inputs: {"token_ids", "segment_ids", "padding_mask"}: int32 [N, L]
        (multiple choice: [N, K, L]).
      labels: int32 [N] class ids, float32 [N] regression targets, int32 [N, L]
        token labels (ignored positions = IGNORE_LABEL), or None (unlabelled).
      lengths: int32 [N] real (unpadded) lengths (multiple choice: [N, K]).
      truncated: number of examples that did not fit in max_seq_len.
    """

    inputs: dict
    labels: np.ndarray | None
    lengths: np.ndarray
    truncated: int = 0


def featurize_classification(examples, tokenizer, max_seq_len=128, label_map=None,
                             regression=False):
    """Tokenizes and packs examples: [CLS] a [SEP] (b [SEP]), pair truncated longest-first.

    Args:
      examples: InputExamples (all single texts or all pairs).
      tokenizer: object with `tokenize(list_of_str) -> RaggedTensor` of ids.
      max_seq_len: L, at least 3 for pairs.
      label_map: LabelMap for classification; default: the sorted labels seen.
      regression: labels are floats (STS-B); `label_map` is ignored.

    Returns:
      Features (labels None when no example is labelled; a mix of labelled and
      unlabelled examples is an error).
    """
    examples = list(examples)
    if not examples:
        raise DataError("no examples to featurize")
    if max_seq_len < 3:
        raise DataError(f"max_seq_len must be at least 3, got {max_seq_len}")
    special = special_ids(tokenizer)
    for i, e in enumerate(examples):
        for field, text in (("text_a", e.text_a), ("text_b", e.text_b)):
            if text is not None and (not isinstance(text, str) or not text.strip()):
                raise DataError(f"{e.source or e.guid or f'example {i}'}: field {field!r} is "
                                f"empty or not text: {text!r}")
    pairs = [e.text_b is not None for e in examples]
    if any(pairs) and not all(pairs):
        first_single = examples[pairs.index(False)]
        raise DataError(f"{first_single.source or first_single.guid}: field 'text_b' is missing "
                        f"but other examples are pairs")
    ids_a = token_ids(tokenizer, [e.text_a for e in examples])
    ids_b = token_ids(tokenizer, [e.text_b for e in examples]) if all(pairs) else None
    inputs, lengths, truncated = pack_rows(ids_a, ids_b, special, max_seq_len)
    labels = _encode_labels(examples, label_map, regression)
    return Features(inputs, labels, lengths, int(truncated.sum()))


def _encode_labels(examples, label_map, regression):
    labelled = [e.label is not None for e in examples]
    if not any(labelled):
        return None
    if not all(labelled):
        e = examples[labelled.index(False)]
        raise DataError(f"{e.source or e.guid}: field 'label' is missing but other examples "
                        f"are labelled")
    if regression:
        out = np.empty(len(examples), np.float32)
        for i, e in enumerate(examples):
            try:
                out[i] = value = float(e.label)
            except (TypeError, ValueError):
                raise DataError(f"{e.source or e.guid}: field 'label': not a number: "
                                f"{e.label!r}") from None
            if not math.isfinite(value):  # one NaN target makes every weight NaN
                raise DataError(f"{e.source or e.guid}: field 'label': not a finite number: {e.label!r}")
        return out
    if label_map is None:
        label_map = LabelMap.from_examples(examples)
    return np.array([label_map.encode(e.label, where=e.source or str(e.guid)) for e in examples],
                    np.int32)
