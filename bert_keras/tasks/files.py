"""Generic labelled files: CSV/TSV with a header row, or JSON lines.

    from bert_keras.tasks import read_examples
    train = read_examples("train.csv")            # columns text, (text_b), (label)
    sst = read_examples("SST-2/train.tsv")        # GLUE header `sentence label`: recognised
    sst.columns                                   # {"text": "sentence", "text_b": None, "label": "label"}

Columns that are not named explicitly are looked up by this project's names
(`text`, `text_b`, `label`) and then by GLUE's (the first match of `GLUE_COLUMNS`),
so a GLUE-style TSV reads without naming its columns; `ExampleList.columns`
says which were used.

Numeric labels are normalised to one spelling (`1`, `1.0`, `"1.0"` and `"01"`
are all the class "1"; `0.50` is "0.5"), so a file mixing JSON ints and floats
does not grow two classes for one value.
"""

from __future__ import annotations

import csv
import json
import math
import pathlib
import re

from bert_keras.errors import DataError
from bert_keras.tasks.classification import InputExample
from bert_keras.tasks.common import ExampleList, csv_rows, text_lines

# GLUE's column names, most specific first: (text, text_b, label candidates).
GLUE_COLUMNS = (
    ("sentence1", "sentence2"),      # STS-B, MNLI, RTE, WNLI
    ("question1", "question2"),      # QQP
    ("#1 String", "#2 String"),      # MRPC
    ("premise", "hypothesis"),       # MNLI / SNLI as distributed by Hugging Face
    ("question", "sentence"),        # QNLI
    ("sentence", None),              # SST-2, CoLA
    ("question", None),
)
GLUE_LABELS = ("label", "gold_label", "is_duplicate", "Quality", "score")

_PLAIN_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")


def normalise_label(label):
    """One spelling per label value: str; numbers written as ints when integral.

    JSON bools become "0"/"1"; 1, 1.0, "1.0", "+1", "01" -> "1"; 0.50 -> "0.5".
    Other strings are kept (stripped); None and "" are None.
    """
    if label is None:
        return None
    if isinstance(label, bool):
        return str(int(label))
    if isinstance(label, (int, float)):
        value = float(label)
    elif isinstance(label, str):
        label = label.strip()
        if not label:
            return None
        if not _PLAIN_NUMBER.match(label):
            return label
        value = float(label)
    else:
        return label
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(value)


def pick_columns(names, text_field=None, text_b_field=None, label_field=None, per_record=False):
    """{"text", "text_b", "label"} -> the column used (None: absent), and whether GLUE's names were used.

    Explicit fields are kept as given (missing ones are reported row by row);
    unnamed ones are `text`/`text_b`/`label` when present, else GLUE's.
    `per_record`: `names` are the first JSON record's keys, and later records
    may hold `text_b`/`label` that the first lacks.
    """
    names = list(names)
    glue = False
    text, text_b = text_field, text_b_field
    if text is None:
        if "text" in names:
            text = "text"
        else:
            for a, b in GLUE_COLUMNS:
                if a in names:
                    text, glue = a, True
                    if text_b is None and b in names:
                        text_b = b
                    break
            else:
                text = "text"  # reported as missing with the header
    if text_b is None:
        text_b = "text_b" if "text_b" in names or (per_record and not glue) else None
    label = label_field
    if label is None:
        label = next((c for c in GLUE_LABELS if c in names), "label" if per_record else None)
        glue = glue or (label not in (None, "label"))
    return {"text": text, "text_b": text_b, "label": label}, glue


def read_examples(path, text_field=None, text_b_field=None, label_field=None, delimiter=None):
    """Reads a generic labelled file: CSV/TSV with a header, or JSON lines.

    Args:
      path: `.csv`, `.tsv`/`.txt` (header row with the field names) or
        `.jsonl`/`.json`/`.ndjson` (one JSON object per line).
      text_field, text_b_field, label_field: field names; None (default) looks
        for `text`, `text_b`, `label` and then for GLUE's names (`sentence`,
        `sentence1`/`sentence2`, `question1`/`question2`, `premise`/`hypothesis`,
        ...).  `text_b` and `label` are optional (absent: single sentences /
        unlabelled).
      delimiter: overrides the delimiter guessed from the extension.

    Returns:
      ExampleList of InputExample (labels as normalised strings, None when
      absent), with `columns` ({"text", "text_b", "label"} -> column name or
      None) and `glue_columns` (True when GLUE's names were recognised).

    Raises:
      DataError naming the file for an empty file, and file, line and field
      for invalid UTF-8, a missing/empty text, malformed JSON, an unterminated
      quote or a row with the wrong number of fields.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    suffix = path.suffix.lower()
    is_json = suffix in (".jsonl", ".json", ".ndjson")
    if is_json:
        records = _jsonl_records(path)
        first = next(records, None)
        if first is None:
            raise DataError(f"{path}: empty file (expected one JSON object a line)")
        names = list(first[1])
        records = _chain([first], records)
    elif suffix in (".csv", ".tsv", ".txt") or delimiter:
        delimiter = delimiter or ("\t" if suffix in (".tsv", ".txt") else ",")
        quoting = csv.QUOTE_MINIMAL
        first = next(text_lines(path), None)
        if delimiter == "\t" and first is not None and pick_columns(
                [h.strip() for h in first[1].rstrip("\r\n").split("\t")],
                text_field, text_b_field, label_field)[1]:
            # GLUE's TSVs hold unbalanced quotes inside sentences: read them as text, as Google does
            quoting = csv.QUOTE_NONE
        header, rows = csv_rows(path, delimiter, quoting)
        names = header
        records = ((n, dict(zip(header, fields))) for n, fields in rows)
    else:
        raise DataError(f"{path}: unknown file type {suffix!r} (expected .csv, .tsv or .jsonl)")
    columns, glue = pick_columns(names, text_field, text_b_field, label_field, per_record=is_json)
    text_field, text_b_field, label_field = columns["text"], columns["text_b"], columns["label"]
    if not is_json and text_field not in names:
        raise DataError(f"{path}:1: no column {text_field!r} (header: {', '.join(names)}); "
                        f"name the text column with --text-field")
    examples = ExampleList()
    examples.columns, examples.glue_columns = columns, glue
    for n, record in records:
        where = f"{path}:{n}"
        text_a = record.get(text_field)
        if text_a is None:
            raise DataError(f"{where}: missing field {text_field!r}")
        if not isinstance(text_a, str) or not text_a.strip():
            raise DataError(f"{where}: field {text_field!r} is empty or not text: {text_a!r}")
        text_b = record.get(text_b_field) if text_b_field else None
        if text_b is not None and (not isinstance(text_b, str) or not text_b.strip()):
            if text_b == "" and not is_json:
                text_b = None  # an empty CSV cell: a single-sentence row
            else:
                raise DataError(f"{where}: field {text_b_field!r} is empty or not text: "
                                f"{text_b!r}")
        label = record.get(label_field) if label_field else None
        if label is not None and not isinstance(label, (str, int, float, bool)):
            raise DataError(f"{where}: field {label_field!r}: not a label: {label!r}")
        label = normalise_label(label)
        guid = record.get("id", record.get("idx", record.get("guid")))
        examples.append(InputExample(text_a, text_b, label,
                                     str(guid) if guid is not None else f"{path.name}:{n}",
                                     where))
    if not examples:
        raise DataError(f"{path}: no examples (only a header)" if not is_json else f"{path}: no examples")
    return examples


def describe_columns(path, examples):
    """One line naming the columns `read_examples` used, e.g. for the CLI."""
    cols = getattr(examples, "columns", None)
    if not cols:
        return None
    parts = [f"text={cols['text']!r}"]
    if cols["text_b"]:
        parts.append(f"text_b={cols['text_b']!r}")
    parts.append(f"label={cols['label']!r}" if cols["label"] else "no label column")
    how = " (GLUE column names)" if getattr(examples, "glue_columns", False) else ""
    return f"{path}: columns {', '.join(parts)}{how}"


def _chain(first, rest):
    yield from first
    yield from rest


def _jsonl_records(path):
    for n, line in text_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{n}: malformed JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(record, dict):
            raise DataError(f"{path}:{n}: expected a JSON object, got {type(record).__name__}")
        yield n, record
