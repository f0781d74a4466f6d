"""Multiple choice (SWAG): score each (context, ending) pair, softmax over the endings.

SWAG's CSV files have the columns `video-id, fold-ind, startphrase, sent1,
sent2, gold-source, ending0, ending1, ending2, ending3, label` (the test file
has no `label`).  Each ending becomes one pair: text A = `sent1`, text B =
`sent2 + " " + ending` (sent2 is the start of the continuation).

    examples = read_swag("train.csv")
    feats = featurize_multiple_choice(examples, tokenizer, max_seq_len=128)
    feats.inputs["token_ids"].shape    # [N, 4, 128] int32, for BertMultipleChoice
    feats.labels                       # [N] int32, the index of the right ending
"""

from __future__ import annotations

import dataclasses
import pathlib

import numpy as np

from bert_keras.errors import DataError
from bert_keras.tasks.classification import Features
from bert_keras.tasks.common import ExampleList, csv_rows, pack_rows, special_ids, token_ids


@dataclasses.dataclass
class MultipleChoiceExample:
    """context: text A; start: the shared start of text B; endings: K choices;
    label: index of the right ending or None; source: "file:line"."""

    context: str
    start: str
    endings: list
    label: int | None = None
    guid: str | None = None
    source: str = ""


def read_swag(path, num_choices=4):
    """Reads a SWAG-style CSV (`sent1`, `sent2`, `ending0..K-1`, optional `label`).

    Returns:
      ExampleList of MultipleChoiceExample.

    Raises:
      DataError naming file, line and field for a missing column, an empty
      field, or a label that is not an integer in [0, K).
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    needed = ["sent1", "sent2"] + [f"ending{i}" for i in range(num_choices)]
    examples = ExampleList()
    header, rows = csv_rows(path)
    for field in needed:
        if field not in header:
            raise DataError(f"{path}:1: missing column {field!r} (header: {header})")
    for n, fields in rows:
        where = f"{path}:{n}"
        row = dict(zip(header, fields))
        for field in ["sent1"] + needed[2:]:
            if not row[field].strip():
                raise DataError(f"{where}: field {field!r} is empty")
        label = None
        if "label" in row and row["label"].strip() != "":
            raw = row["label"].strip()
            if not raw.isdigit() or int(raw) >= num_choices:
                raise DataError(f"{where}: field 'label': {raw!r} is not an ending index "
                                f"0..{num_choices - 1}")
            label = int(raw)
        guid = row.get("fold-ind") or row.get("id") or f"{path.name}:{n}"
        examples.append(MultipleChoiceExample(context=row["sent1"], start=row["sent2"],
                                              endings=[row[f"ending{i}"] for i in range(num_choices)],
                                              label=label, guid=guid, source=where))
    return examples


def featurize_multiple_choice(examples, tokenizer, max_seq_len=128):
    """Packs every (context, start + ending) pair: inputs [N, K, L] int32, labels [N].

    Pairs are truncated longest-first like sentence pairs.
    """
    examples = list(examples)
    if not examples:
        raise DataError("no multiple-choice examples to featurize")
    k = len(examples[0].endings)
    for e in examples:
        if len(e.endings) != k:
            raise DataError(f"{e.source}: {len(e.endings)} endings, expected {k}")
    special = special_ids(tokenizer)
    contexts = token_ids(tokenizer, [e.context for e in examples])
    seconds = token_ids(tokenizer, [f"{e.start} {ending}".strip()
                                    for e in examples for ending in e.endings])
    # one row per (example, choice), in that order, then [N, K, L]
    flat, flat_lengths, flat_truncated = pack_rows([a for a in contexts for _ in range(k)], seconds, special,
                                                   max_seq_len)
    shape = (len(examples), k, max_seq_len)
    inputs = {name: value.reshape(shape) for name, value in flat.items()}
    lengths = flat_lengths.reshape(shape[:2])
    truncated = flat_truncated.sum()
    labelled = [e.label is not None for e in examples]
    labels = None
    if any(labelled):
        if not all(labelled):
            e = examples[labelled.index(False)]
            raise DataError(f"{e.source}: field 'label' is missing but other examples are "
                            f"labelled")
        labels = np.array([e.label for e in examples], np.int32)
    return Features(inputs, labels, lengths, int(truncated))
