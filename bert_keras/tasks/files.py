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
are all the class "1"; `0.50` is "0.5"), so a file mixing JSON ints and floats,
or numbers and the same numbers written as strings, does not grow two classes
for one value.  Integers are kept exact (10000000000000001 and
10000000000000000 stay two classes).

JSON booleans are labels only in a column of booleans: `true`/`false` are then
the classes "true" and "false".  A boolean in a column that also holds numbers
or strings is refused, naming the file, the line, the field and the value, with
the line of the first label of the other kind: `true` would otherwise merge
silently into the class "1" (or stand apart from "true").

`ExampleList.columns` names only columns that exist: `text_b` (and `label`) is
None when no record of a JSON lines file has it.  A column named explicitly
(`text_b_field=`, `label_field=`) that the header or every record lacks is an
error rather than a silent single-text or unlabelled read.
"""

from __future__ import annotations

import csv
import decimal
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

    JSON bools become "false"/"true" (`read_examples` accepts them only in a
    column of booleans); 1, 1.0, "1.0", "+1", "01" -> "1"; 0.50 -> "0.5";
    integers stay exact.  Other strings are kept (stripped); None and "" are None.
    """
    if label is None:
        return None
    if isinstance(label, bool):
        return "true" if label else "false"
    if isinstance(label, int):
        return str(label)
    if isinstance(label, float):
        if math.isfinite(label) and label == int(label):
            return str(int(label))
        return repr(label)
    if isinstance(label, str):
        label = label.strip()
        if not label:
            return None
        if not _PLAIN_NUMBER.match(label):
            return label
        value = decimal.Decimal(label)
        if value == value.to_integral_value():
            return str(int(value))
        # the shortest spelling of the same value: what repr gives a JSON float of it
        short = repr(float(value))
        return short if decimal.Decimal(short) == value else format(value.normalize(), "f")
    return label


def describe_json(value, limit=40):
    """A JSON value's type and the value as JSON, for messages: 'a number (123)', 'null', ..."""
    if value is None:
        return "null"
    kind = ("a boolean" if isinstance(value, bool) else "a number" if isinstance(value, (int, float))
            else "a string" if isinstance(value, str) else "a list" if isinstance(value, list)
            else "an object" if isinstance(value, dict) else f"a {type(value).__name__}")
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return f"{kind} ({text})"


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
    explicit = {"text_b": text_b_field is not None, "label": label_field is not None}
    columns, glue = pick_columns(names, text_field, text_b_field, label_field, per_record=is_json)
    text_field, text_b_field, label_field = columns["text"], columns["text_b"], columns["label"]
    if not is_json and text_field not in names:
        raise DataError(f"{path}:1: no column {text_field!r} (header: {', '.join(names)}); "
                        f"name the text column with --text-field")
    if not is_json:
        for key, given in (("text_b", text_b_field), ("label", label_field)):
            if given is not None and given not in names:
                raise DataError(f"{path}:1: no column {given!r} for {key} (header: {', '.join(names)})")
    examples = ExampleList()
    examples.columns, examples.glue_columns = columns, glue
    seen = {"text_b": False, "label": False}
    first_label = None  # (where, value) of the first label: booleans only in a column of booleans
    for n, record in records:
        where = f"{path}:{n}"
        if text_field not in record:
            raise DataError(f"{where}: missing field {text_field!r}")
        text_a = record[text_field]
        if not isinstance(text_a, str):
            raise DataError(f"{where}: field {text_field!r} is {describe_json(text_a)}, expected a string")
        if not text_a.strip():
            raise DataError(f"{where}: field {text_field!r} is empty: {text_a!r}")
        text_b = record.get(text_b_field) if text_b_field else None
        seen["text_b"] = seen["text_b"] or (bool(text_b_field) and text_b_field in record)
        if text_b is not None and not isinstance(text_b, str):
            raise DataError(f"{where}: field {text_b_field!r} is {describe_json(text_b)}, expected a string")
        if text_b is not None and not text_b.strip():
            if text_b == "" and not is_json:
                text_b = None  # an empty CSV cell: a single-sentence row
            else:
                raise DataError(f"{where}: field {text_b_field!r} is empty: {text_b!r}")
        label = record.get(label_field) if label_field else None
        seen["label"] = seen["label"] or (bool(label_field) and label_field in record)
        if label is not None and not isinstance(label, (str, int, float, bool)):
            raise DataError(f"{where}: field {label_field!r} is {describe_json(label)}, not a label")
        if label is not None and not (isinstance(label, str) and not label.strip()):
            if first_label is None:
                first_label = (n, label)
            elif isinstance(label, bool) != isinstance(first_label[1], bool):
                raise DataError(
                    f"{where}: field {label_field!r} is {_kind_and_value(label)} but line {first_label[0]}'s "
                    f"label is {_kind_and_value(first_label[1])}: JSON true/false are labels only in a "
                    f"column of booleans (write all labels as booleans, or none)")
        label = normalise_label(label)
        guid = record.get("id", record.get("idx", record.get("guid")))
        examples.append(InputExample(text_a, text_b, label,
                                     str(guid) if guid is not None else f"{path.name}:{n}",
                                     where))
    if not examples:
        raise DataError(f"{path}: no examples (only a header)" if not is_json else f"{path}: no examples")
    if is_json:
        # report only columns some record has: the defaults text_b/label may be absent everywhere
        for key, given in (("text_b", text_b_field), ("label", label_field)):
            if given and not seen[key]:
                if key == "text_b" and explicit["text_b"] or key == "label" and explicit["label"]:
                    raise DataError(f"{path}: no record has the field {given!r} named for {key}")
                columns[key] = None
    return examples


def _kind_and_value(value):
    """'true (a JSON boolean)', '1 (a number)', '"1" (a string)'."""
    kind = "a JSON boolean" if isinstance(value, bool) else "a number" if isinstance(value, (int, float)) \
        else "a string"
    return f"{json.dumps(value, ensure_ascii=False)} ({kind})"


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


class _BadJSON(ValueError):
    pass


def _refuse_duplicate_keys(pairs):
    record = {}
    for key, value in pairs:
        if key in record:  # json.loads would keep the last one silently
            raise _BadJSON(f"field {key!r} appears twice ({describe_json(record[key])}, then {describe_json(value)})")
        record[key] = value
    return record


def _refuse_constant(name):
    raise _BadJSON(f"{name} is not JSON (a label or text must be a finite number or a string)")


def _jsonl_records(path):
    for n, line in text_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line, object_pairs_hook=_refuse_duplicate_keys, parse_constant=_refuse_constant)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{n}: malformed JSON ({e.msg} at column {e.colno})") from None
        except _BadJSON as e:
            raise DataError(f"{path}:{n}: {e}") from None
        if not isinstance(record, dict):
            raise DataError(f"{path}:{n}: expected a JSON object, got {type(record).__name__}")
        yield n, record
