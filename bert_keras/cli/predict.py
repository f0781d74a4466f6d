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
before the model loads.

With --output, a progress bar and a summary line go to stdout.

examples:
  bert-keras predict --model serving/sentiment/1 "a gorgeous, witty film." "flat and dull."
  bert-keras predict --model tflite/model_text.tflite --input reviews.txt --output predictions.jsonl
  cat reviews.txt | bert-keras predict --model runs/sentiment/best
  bert-keras predict --model serving/squad/1 --text-b "BERT was published in 2019." "When was BERT published?"
"""

import contextlib
import json
import os
import sys

from bert_keras.cli._task_data import add_casing_arguments


def add_arguments(p):
    p.add_argument("texts", nargs="*", help="texts to classify (default: --input or stdin)")
    p.add_argument("--model", required=True,
                   help="a SavedModel folder, a .tflite file (or a folder with model_text.tflite), or a model folder")
    p.add_argument("--input", help="file of texts, one a line (pair models: text TAB text_b; a single-text "
                                   "model keeps TABs as text), or JSON lines")
    p.add_argument("--text-b", action="append",
                   help="second text for pair models, once per command-line text (or once for all)")
    p.add_argument("--output", help="write the JSON lines here instead of stdout")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-len", type=int, help="model folders only (default: the folder's)")
    add_casing_arguments(p)


BLANK = "blank line: no text to classify"


class _Line:
    """One input line: its text and text_b (None: absent), or the error its record carries."""

    __slots__ = ("number", "text", "text_b", "json", "error")

    def __init__(self, number, text=None, text_b=None, json_line=False, error=None):
        self.number, self.text, self.text_b, self.json, self.error = number, text, text_b, json_line, error


def _parse_line(line, where, number):
    """A `_Line` of an input line; JSON lines are parsed and their field types checked here."""
    from bert_keras.errors import BertKerasError
    from bert_keras.tasks.files import describe_json

    if not line.strip():
        return _Line(number, error=BLANK)
    if not line.lstrip().startswith("{"):
        return _Line(number, line)  # split on a TAB or not once the model says whether it takes pairs
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise BertKerasError(f"{where}: invalid JSON ({e.msg})") from e
    if "text" not in obj:
        raise BertKerasError(f"{where}: JSON line without a 'text' field")
    text, text_b = obj["text"], obj.get("text_b")
    if not isinstance(text, str):
        raise BertKerasError(f'{where}: field "text" is {describe_json(text)}, expected a string')
    if isinstance(text_b, list):
        bad = next((i for i, x in enumerate(text_b) if not isinstance(x, str)), None)
        if bad is not None:
            raise BertKerasError(f'{where}: field "text_b" holds {describe_json(text_b[bad])} at index {bad}, '
                                 f"expected a list of strings")
    elif text_b is not None and not isinstance(text_b, str):
        raise BertKerasError(f'{where}: field "text_b" is {describe_json(text_b)}, expected a string '
                             f"(multiple choice: a list of strings)")
    if not text.strip():
        return _Line(number, error='field "text" is empty: no text to classify')
    return _Line(number, text, text_b, json_line=True)


def _split_lines(raw):
    """Lines cut at "\n" only (a trailing "\r" dropped): str.splitlines() would also cut at
    U+2028, U+0085, form feeds, ... inside a text, and shift every later record."""
    newline = "\n" if isinstance(raw, str) else b"\n"
    lines = raw.split(newline)
    if lines and not lines[-1]:
        lines.pop()
    cr = "\r" if isinstance(raw, str) else b"\r"
    return [line[:-1] if line.endswith(cr) else line for line in lines]


def _decoded_lines(stream, where):
    """The lines of a binary stream, each decoded as UTF-8; a bad byte names `where` and the line."""
    from bert_keras.errors import BertKerasError

    data = stream.read()
    if isinstance(data, str):  # an already decoded text stream (e.g. io.StringIO)
        return _split_lines(data)
    lines = []
    for n, raw in enumerate(_split_lines(data), 1):
        try:
            lines.append(raw.decode("utf-8-sig" if n == 1 else "utf-8"))
        except UnicodeDecodeError as e:
            raise BertKerasError(f"{where}:{n}: not valid UTF-8 (byte {raw[e.start]:#04x} at column "
                                 f"{e.start + 1})") from None
    return lines


def _input_lines(args):
    """(where, parsed `_Line`s) of --input or stdin; (None, None) when the texts are on the command line."""
    from bert_keras.errors import BertKerasError

    if args.texts:
        return None, None
    if args.input:
        try:
            with open(args.input, "rb") as f:
                where, lines = args.input, _decoded_lines(f, args.input)
        except OSError as e:
            raise BertKerasError(f"{args.input}: cannot read ({e.strerror})") from e
    else:
        where = "<stdin>"
        lines = _decoded_lines(getattr(sys.stdin, "buffer", sys.stdin), where)
    if not lines:
        raise BertKerasError(f"{where}: no texts")
    return where, [_parse_line(line, f"{where}:{n}", n) for n, line in enumerate(lines, 1)]


def _resolve(lines, where, pair, multiple_choice):
    """Fills in text/text_b (TAB split for pair models) and the errors that depend on the model."""
    from bert_keras.errors import BertKerasError
    from bert_keras.tasks.files import describe_json

    for line in lines:
        if line.error:
            continue
        at = f"{where}:{line.number}"
        if not line.json:
            # Only a pair model splits on the TAB: for one text it is text (a review may hold one).
            if pair and "\t" in line.text:
                line.text, line.text_b = line.text.split("\t", 1)
                if not line.text.strip():
                    line.error = "empty text before the TAB: no text to classify"
                elif not line.text_b.strip():
                    line.error = "empty text_b after the TAB: the model takes pairs"
            if multiple_choice and isinstance(line.text_b, str) and line.text_b.lstrip().startswith("["):
                try:
                    line.text_b = json.loads(line.text_b)
                except json.JSONDecodeError as e:
                    raise BertKerasError(f"{at}: text_b after the TAB is not a JSON list ({e.msg})") from None
            continue
        if isinstance(line.text_b, list) and not multiple_choice:
            raise BertKerasError(f'{at}: field "text_b" is {describe_json(line.text_b)}, expected a string '
                                 f"(a list is for multiple-choice models)")
        if pair and isinstance(line.text_b, str) and not line.text_b.strip():
            line.error = 'field "text_b" is empty: the model takes pairs'


def _read(args, lines, where, pair=False, multiple_choice=False):
    """(texts, texts_b or None, positions) for the model; positions: the index in `lines` of each
    text (None for command-line texts).  `pair`: the model takes text_b."""
    from bert_keras.errors import BertKerasError

    if args.texts:
        texts = list(args.texts)
        b = args.text_b
        if b and len(b) == 1 and len(texts) > 1:
            b = b * len(texts)
        if b and len(b) != len(texts):
            raise BertKerasError(f"--text-b given {len(b)} times for {len(texts)} texts")
        if multiple_choice and b:
            b = [json.loads(x) if x.lstrip().startswith("[") else x for x in b]
        return texts, b, None
    _resolve(lines, where, pair, multiple_choice)
    positions = [i for i, line in enumerate(lines) if not line.error]
    texts = [lines[i].text for i in positions]
    texts_b = [lines[i].text_b for i in positions]
    if all(b is None for b in texts_b):
        texts_b = None
    elif any(b is None for b in texts_b):
        missing = next(lines[i].number for i in positions if lines[i].text_b is None)
        raise BertKerasError(f"{where}:{missing}: no text_b (no TAB) but other lines have one")
    return texts, texts_b, positions


# Line separators JSON leaves raw with ensure_ascii=False, that str.splitlines() and others
# take for line ends: escaped, so that every reader sees one record a line.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _json_line(record):
    return json.dumps(record, ensure_ascii=False).translate(_LINE_BREAKS) + "\n"


def _by_length(predictor, texts, texts_b, batch_size, progress=None):
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
    for n, (i, record) in enumerate(zip(order, batches), 1):
        records[i] = record
        if progress is not None and (n % batch_size == 0 or n == len(texts)):
            progress.update(n)
    return records


def run(args) -> int:
    from bert_keras.writing import single_writer

    with single_writer(args.output) if args.output else contextlib.nullcontext():
        return _predict(args)


def _predict(args):
    from bert_keras.errors import BertKerasError
    from bert_keras.export.predict import load_predictor
    from bert_keras.writing import atomic_write

    if args.batch_size < 1:
        raise BertKerasError(f"--batch-size must be >= 1, got {args.batch_size}")
    is_export = args.model.endswith(".tflite") or any(
        os.path.exists(os.path.join(args.model, f)) for f in ("saved_model.pb", "model_text.tflite"))
    if args.lower_case is not None and is_export:
        raise BertKerasError("--cased/--uncased apply to model folders only: an export has its casing built in")
    where, lines = _input_lines(args)  # bad input fails before the model loads
    # stdout carries the predictions: the line naming a folder's casing goes to stderr
    with contextlib.redirect_stdout(sys.stderr):
        predictor = load_predictor(args.model, max_seq_len=args.max_seq_len, lower_case=args.lower_case)
    multiple_choice = predictor.spec.get("task") == "multiple_choice"
    texts, texts_b, positions = _read(args, lines, where, pair=predictor.pair, multiple_choice=multiple_choice)
    # A progress bar when stdout is free (--output given) and there is more than one batch.
    progress = None
    if args.output and len(texts) > args.batch_size:
        import keras

        progress = keras.utils.Progbar(len(texts), unit_name="text")

    def records():
        predicted = _by_length(predictor, texts, texts_b, args.batch_size, progress) if texts else []
        if positions is None:
            yield from predicted
            return
        # one record per input line: the predictions back in their lines, error records in the others
        by_line = dict(zip(positions, predicted))
        for i, line in enumerate(lines):
            yield by_line[i] if line.error is None else {"line": line.number, "error": line.error}

    def emit(out):
        for record in records():
            out.write(_json_line(record))

    if args.output:
        # into a temporary sibling, renamed when complete: a failure keeps the previous file
        def write(tmp):
            with open(tmp, "w", encoding="utf-8") as f:
                emit(f)

        atomic_write(args.output, write)
    else:
        emit(sys.stdout)
    errors = 0 if positions is None else len(lines) - len(positions)
    if args.output:
        if errors:
            print(f"wrote {len(lines)} records to {args.output}: {len(texts)} predictions, {errors} error "
                  f"record{'' if errors == 1 else 's'}")
        else:
            print(f"wrote {len(texts)} predictions to {args.output}")
    if errors:
        sys.stdout.flush()
        print(f"{where}: {errors} of {len(lines)} lines got an error record instead of a prediction "
              f"(blank line or empty text; see their \"error\" field)", file=sys.stderr)
    return 0
