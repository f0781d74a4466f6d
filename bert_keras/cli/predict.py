"""Run an exported model (SavedModel folder, model_text.tflite) or a model folder on text.

Texts come from the command line, from --input (one a line, UTF-8; pair models
read `text<TAB>text_b`, the first column being text and the second text_b,
while for single-text models a TAB is part of the text; or JSON lines with
"text" and "text_b"), or from stdin (read the same way).  One JSON object per text is written to stdout (or --output):
classification {"label", "probabilities"}, regression {"score"}, NER
{"tokens", "labels"} (per WordPiece), span {"answer", "score", ...},
multiple choice {"choice", "probabilities"} (text_b: a JSON list of endings).

Every input line gets exactly one output record, in order, so record N is the
answer to line N (lines end at "\n" only).  A line with nothing to classify
(blank, whitespace only, an empty "text", or an empty text_b for a pair model)
gets an error record instead of a prediction, {"line": N, "error": "..."},
e.g. {"line": 3, "error": "blank line: no text to classify"}; the other lines
are predicted as usual, the exit status stays 0, and one line on stderr says
how many error records there are.  In JSON lines, "text" must be a string and
"text_b" a string (multiple choice: a list of strings) or null/absent; any
other JSON type is an error naming the file, the line and the field, raised
before the model loads (for stdin: before its first 1,024 lines are predicted).
--format text reads every line as text (a review may start with "{"), --format
jsonl every line as JSON; the default, auto, takes a line starting with "{" as JSON.
A JSON line with a key twice is refused.  A value the model gives that is not
finite (NaN weights) is written as null, and the record gets an "error" naming it.

The input is read, predicted and written 1,024 lines at a time: memory stays
bounded, and on stdout record N appears once its batch is done.  --output is
written whole (a temporary file renamed when complete); it may replace a previous
predictions file, never the input, a file in a model folder or any other file.
With --output, progress (a bar on a terminal, else a plain line every 10 s) and a
summary line go to stdout.

A SavedModel runs the operations its graph holds, whatever they are (reading or
writing files included): predict only with models you trust, as TensorFlow's
security guide says of every SavedModel.

examples:
  bert-keras predict --model serving/sentiment/1 "a gorgeous, witty film." "flat and dull."
  bert-keras predict --model tflite/model_text.tflite --input reviews.txt --output predictions.jsonl
  cat reviews.txt | bert-keras predict --model runs/sentiment/best
  bert-keras predict --model serving/squad/1 --text-b "BERT was published in 2019." "When was BERT published?"
"""

import contextlib
import itertools
import json
import math
import os
import sys

from bert_keras.cli._predict_input import (CHUNK_LINES, _chunks, _command_line_texts, _open_input,  # noqa: F401
                                         _resolve)
from bert_keras.cli._task_data import add_casing_arguments


def add_arguments(p):
    p.add_argument("texts", nargs="*", help="texts to classify (default: --input or stdin)")
    p.add_argument("--model", required=True,
                   help="a SavedModel folder, a .tflite file (or a folder with model_text.tflite), or a model folder")
    p.add_argument("--input", help="file of texts, one a line (pair models: text TAB text_b; a single-text "
                                   "model keeps TABs as text), or JSON lines")
    p.add_argument("--text-b", action="append",
                   help="second text for pair models, once per command-line text (or once for all)")
    p.add_argument("--format", choices=("auto", "text", "jsonl"), default="auto",
                   help="how --input or stdin is read: auto (a line starting with '{' is JSON; the default), "
                        "text (every line is text), jsonl (every line is a JSON object)")
    p.add_argument("--output", help="write the JSON lines here instead of stdout (a previous predictions file "
                                    "is replaced; an input or any other file is refused)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-len", type=int, help="model folders only: 3..512 (default: the folder's)")
    add_casing_arguments(p)


class _Batcher:
    """Turns chunks of parsed lines into (texts, texts_b or None, positions) for the model;
    positions: the index in the chunk of each text.  Remembers across chunks whether the
    input has text_b, so that every line of the input agrees."""

    def __init__(self, where, pair, multiple_choice):
        self.where, self.pair, self.multiple_choice = where, pair, multiple_choice
        self.with_b = None  # the first line that has a text_b, or that has none: (number, bool)

    def __call__(self, lines):
        from bert_keras.errors import BertKerasError

        _resolve(lines, self.where, self.pair, self.multiple_choice)
        positions = [i for i, line in enumerate(lines) if not line.error]
        for i in positions:
            has_b = lines[i].text_b is not None
            if self.with_b is None:
                self.with_b = (lines[i].number, has_b)
            elif has_b != self.with_b[1]:
                with_b, without = (self.with_b[0], lines[i].number) if self.with_b[1] else \
                    (lines[i].number, self.with_b[0])
                raise BertKerasError(f"{self.where}:{without}: no text_b (no TAB) but line {with_b} has one")
        texts = [lines[i].text for i in positions]
        texts_b = [lines[i].text_b for i in positions] if self.with_b and self.with_b[1] else None
        return texts, texts_b, positions


# Line separators JSON leaves raw with ensure_ascii=False, that str.splitlines() and others
# take for line ends: escaped, so that every reader sees one record a line.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _finite(record):
    """(record, whether it had a value that is not finite): such a value becomes null and the
    record gets an "error" naming it, so that every line stays valid JSON and none reads as a score."""
    bad = []

    def clean(value, name):
        if isinstance(value, dict):
            return {k: clean(v, f"{name}.{k}" if name else k) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v, name) for v in value]
        if isinstance(value, float) and not math.isfinite(value):
            bad.append(name)
            return None
        return value

    cleaned = clean(record, "")
    if not bad:
        return record, False
    names = ", ".join(dict.fromkeys(bad))
    cleaned["error"] = f"not finite: {names} (the model's outputs are NaN or infinite: are its weights?)"
    return cleaned, True


def _json_line(record):
    return json.dumps(record, ensure_ascii=False, allow_nan=False).translate(_LINE_BREAKS) + "\n"


def _by_length(predictor, texts, texts_b, batch_size):
    """The records in input order, computed on batches of texts of similar length.

    A batch is as slow as its longest text (the model pads to it), so the texts are sorted
    by length (characters, both texts of a pair), cut into batches, and the records put
    back in input order.
    """
    size = [len(t) + (len(str(texts_b[i])) if texts_b is not None else 0) for i, t in enumerate(texts)]
    order = sorted(range(len(texts)), key=size.__getitem__)
    records = [None] * len(texts)
    batches = predictor.predict([texts[i] for i in order],
                                None if texts_b is None else [texts_b[i] for i in order], batch_size=batch_size)
    for i, record in zip(order, batches):
        records[i] = record
    return records


def run(args) -> int:
    from bert_keras.errors import BertKerasError
    from bert_keras.output_files import check_output_file
    from bert_keras.locks import single_writer

    if args.batch_size < 1:
        raise BertKerasError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.max_seq_len is not None and not 3 <= args.max_seq_len <= 512:
        raise BertKerasError(f"--max-seq-len must be in 3..512 (omit it for the folder's), got {args.max_seq_len}")
    check_output_file(args.output, "predictions", [("--input", args.input), ("--model", args.model)])
    with single_writer(args.output) if args.output else contextlib.nullcontext():
        return _predict(args)


class _Tally:
    """What was written: records, predictions, error records, records with a non-finite value."""

    def __init__(self):
        self.records = self.predictions = self.errors = self.not_finite = 0


def _records(predictor, chunks, batcher, batch_size, tally, progress):
    """The records of every input line, chunk by chunk, in order: predictions in their lines,
    error records in the others."""
    for chunk in chunks:
        texts, texts_b, positions = batcher(chunk)
        by_position = dict(zip(positions, _by_length(predictor, texts, texts_b, batch_size) if texts else []))
        for i, line in enumerate(chunk):
            if line.error is not None:
                tally.errors += 1
                yield {"line": line.number, "error": line.error}
            else:
                tally.predictions += 1
                yield by_position[i]
        if progress is not None:
            progress.add(len(texts))


def _predict(args):
    from bert_keras.errors import BertKerasError
    from bert_keras.export.predict import load_predictor
    from bert_keras.writing import atomic_write

    is_export = args.model.endswith(".tflite") or any(
        os.path.exists(os.path.join(args.model, f)) for f in ("saved_model.pb", "model_text.tflite"))
    if args.lower_case is not None and is_export:
        raise BertKerasError("--cased/--uncased apply to model folders only: an export has its casing built in")
    with contextlib.ExitStack() as stack:
        where, chunks, total = None, None, None
        if not args.texts:
            if args.input:  # a whole pass first: bad input fails before the model loads
                with _open_input(args) as (where, lines):
                    total = sum(1 for line in lines if line.error is None)  # the texts to classify
            where, lines = stack.enter_context(_open_input(args))
            chunks = _chunks(lines, max(CHUNK_LINES, 8 * args.batch_size))
            first = next(chunks, None)  # stdin: its first chunk is checked before the model loads
            if first is None:
                raise BertKerasError(f"{where}: no texts")
            chunks = itertools.chain([first], chunks)
        # stdout carries the predictions: the line naming a folder's casing goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            predictor = load_predictor(args.model, max_seq_len=args.max_seq_len, lower_case=args.lower_case)
        multiple_choice = predictor.spec.get("task") == "multiple_choice"
        tally = _Tally()
        if args.texts:
            texts, texts_b = _command_line_texts(args, multiple_choice)
            records = predictor.predict(texts, texts_b, batch_size=args.batch_size)
            tally.predictions = len(texts)
        else:
            if args.input:  # the checks that need the model, on the whole file before any record
                with _open_input(args) as (_, again):
                    check = _Batcher(where, predictor.pair, multiple_choice)
                    for chunk in _chunks(again, CHUNK_LINES):
                        check(chunk)
            # A progress bar when stdout is free (--output given) and there is more than one batch.
            progress = None
            if args.output and (total is None or total > args.batch_size):
                from bert_keras.progress import Progress

                progress = Progress(total, unit_name="text")
            records = _records(predictor, chunks, _Batcher(where, predictor.pair, multiple_choice),
                               args.batch_size, tally, progress)

        def emit(out):
            for record in records:
                record, not_finite = _finite(record)
                tally.records += 1
                tally.not_finite += not_finite
                out.write(_json_line(record))
                if out is sys.stdout and tally.records % args.batch_size == 0:
                    out.flush()  # a reader downstream gets each record once its batch is done

        if args.output:
            # into a temporary sibling, renamed when complete: a failure keeps the previous file
            def write(tmp):
                with open(tmp, "w", encoding="utf-8") as f:
                    emit(f)

            atomic_write(args.output, write)
        else:
            emit(sys.stdout)
    if args.output:
        if tally.errors:
            print(f"wrote {tally.records} records to {args.output}: {tally.predictions} predictions, "
                  f"{tally.errors} error record{'' if tally.errors == 1 else 's'}")
        else:
            print(f"wrote {tally.predictions} predictions to {args.output}")
    if tally.errors:
        sys.stdout.flush()
        print(f"{where}: {tally.errors} of {tally.records} lines got an error record instead of a prediction "
              f"(blank line or empty text; see their \"error\" field)", file=sys.stderr)
    if tally.not_finite:
        sys.stdout.flush()
        print(f"{where or 'the texts'}: {tally.not_finite} prediction{'' if tally.not_finite == 1 else 's'} "
              f"held NaN or infinite values, written as null with an \"error\" field: check the model's weights",
              file=sys.stderr)
    return 0
