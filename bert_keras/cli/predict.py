"""Run an exported model (SavedModel folder, model_text.tflite) or a model folder on text.

Texts come from the command line, from --input (one a line, UTF-8; pair models
read `text<TAB>text_b`, the first column being text and the second text_b,
while for single-text models a TAB is part of the text; or JSON lines with
"text" and "text_b"), or from stdin (read the same way).  One JSON object per text is written to stdout (or --output):
classification {"label", "probabilities"}, regression {"score"}, NER
{"tokens", "labels"} (per WordPiece), span {"answer", "score", ...},
multiple choice {"choice", "probabilities"} (text_b: a JSON list of endings).

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


def _parse_line(line, where, pair):
    from bert_keras.errors import BertKerasError

    if line.lstrip().startswith("{"):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise BertKerasError(f"{where}: invalid JSON ({e.msg})") from e
        if "text" not in obj:
            raise BertKerasError(f"{where}: JSON line without a 'text' field")
        return str(obj["text"]), obj.get("text_b")
    # Only a pair model splits on the TAB: for one text it is text (a review may hold one).
    if pair and "\t" in line:
        a, b = line.split("\t", 1)
        return a, b
    return line, None


def _decoded_lines(stream, where):
    """The lines of a binary stream, each decoded as UTF-8; a bad byte names `where` and the line."""
    from bert_keras.errors import BertKerasError

    data = stream.read()
    if isinstance(data, str):  # an already decoded text stream (e.g. io.StringIO)
        return data.splitlines()
    lines = []
    for n, raw in enumerate(data.splitlines(), 1):
        try:
            lines.append(raw.decode("utf-8-sig" if n == 1 else "utf-8"))
        except UnicodeDecodeError as e:
            raise BertKerasError(f"{where}:{n}: not valid UTF-8 (byte {raw[e.start]:#04x} at column "
                                 f"{e.start + 1})") from None
    return lines


def _input_lines(args):
    """(where, decoded lines) of --input or stdin; (None, None) when the texts are on the command line."""
    from bert_keras.errors import BertKerasError

    if args.texts:
        return None, None
    if args.input:
        try:
            with open(args.input, "rb") as f:
                return args.input, _decoded_lines(f, args.input)
        except OSError as e:
            raise BertKerasError(f"{args.input}: cannot read ({e.strerror})") from e
    return "<stdin>", _decoded_lines(getattr(sys.stdin, "buffer", sys.stdin), "<stdin>")


def _read(args, lines, where, pair=False):
    """(texts, texts_b or None) from the command line or `lines`; `pair`: the model takes text_b."""
    from bert_keras.errors import BertKerasError

    if args.texts:
        texts = list(args.texts)
        b = args.text_b
        if b and len(b) == 1 and len(texts) > 1:
            b = b * len(texts)
        if b and len(b) != len(texts):
            raise BertKerasError(f"--text-b given {len(b)} times for {len(texts)} texts")
        return texts, b
    pairs = [(i, _parse_line(line, f"{where}:{i + 1}", pair)) for i, line in enumerate(lines) if line.strip()]
    if not pairs:
        raise BertKerasError(f"{where}: no texts")
    texts = [a for _, (a, _) in pairs]
    texts_b = [b for _, (_, b) in pairs]
    if all(b is None for b in texts_b):
        texts_b = None
    elif any(b is None for b in texts_b):
        missing = next(i for i, (_, b) in pairs if b is None)
        raise BertKerasError(f"{where}:{missing + 1}: no text_b (no TAB) but other lines have one")
    return texts, texts_b


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
    from bert_keras.utils import single_writer

    with single_writer(args.output) if args.output else contextlib.nullcontext():
        return _predict(args)


def _predict(args):
    from bert_keras.errors import BertKerasError
    from bert_keras.export.predict import load_predictor
    from bert_keras.utils import atomic_write

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
    texts, texts_b = _read(args, lines, where, pair=predictor.pair)
    if predictor.spec.get("task") == "multiple_choice" and texts_b is not None:
        texts_b = [json.loads(b) if isinstance(b, str) and b.lstrip().startswith("[") else b for b in texts_b]
    # A progress bar when stdout is free (--output given) and there is more than one batch.
    progress = None
    if args.output and len(texts) > args.batch_size:
        import keras

        progress = keras.utils.Progbar(len(texts), unit_name="text")

    def emit(out):
        for record in _by_length(predictor, texts, texts_b, args.batch_size, progress):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")

    if args.output:
        # into a temporary sibling, renamed when complete: a failure keeps the previous file
        def write(tmp):
            with open(tmp, "w", encoding="utf-8") as f:
                emit(f)

        atomic_write(args.output, write)
    else:
        emit(sys.stdout)
    if args.output:
        print(f"wrote {len(texts)} predictions to {args.output}")
    return 0
