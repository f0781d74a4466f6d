"""Run an exported model (SavedModel folder, model_text.tflite) or a model folder on text.

Texts come from the command line, from --input (one a line; TAB-separated
`text<TAB>text_b` for pair models; or JSON lines with "text" and "text_b"),
or from stdin.  One JSON object per text is written to stdout (or --output):
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

import json
import sys


def add_arguments(p):
    p.add_argument("texts", nargs="*", help="texts to classify (default: --input or stdin)")
    p.add_argument("--model", required=True,
                   help="a SavedModel folder, a .tflite file (or a folder with model_text.tflite), or a model folder")
    p.add_argument("--input", help="file of texts, one a line (TAB-separated pairs), or JSON lines")
    p.add_argument("--text-b", action="append",
                   help="second text for pair models, once per command-line text (or once for all)")
    p.add_argument("--output", help="write the JSON lines here instead of stdout")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-len", type=int, help="model folders only (default: the folder's)")


def _parse_line(line, where):
    from bert_keras.errors import BertKerasError

    if line.lstrip().startswith("{"):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise BertKerasError(f"{where}: invalid JSON ({e.msg})") from e
        if "text" not in obj:
            raise BertKerasError(f"{where}: JSON line without a 'text' field")
        return str(obj["text"]), obj.get("text_b")
    if "\t" in line:
        a, b = line.split("\t", 1)
        return a, b
    return line, None


def _read(args):
    from bert_keras.errors import BertKerasError

    if args.texts:
        texts = list(args.texts)
        b = args.text_b
        if b and len(b) == 1 and len(texts) > 1:
            b = b * len(texts)
        if b and len(b) != len(texts):
            raise BertKerasError(f"--text-b given {len(b)} times for {len(texts)} texts")
        return texts, b
    if args.input:
        try:
            with open(args.input, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise BertKerasError(f"{args.input}: cannot read ({e.strerror})") from e
        where = args.input
    else:
        lines = sys.stdin.read().splitlines()
        where = "stdin"
    pairs = [_parse_line(line, f"{where}:{i + 1}") for i, line in enumerate(lines) if line.strip()]
    if not pairs:
        raise BertKerasError(f"{where}: no texts")
    texts = [a for a, _ in pairs]
    texts_b = [b for _, b in pairs]
    if all(b is None for b in texts_b):
        texts_b = None
    elif any(b is None for b in texts_b):
        missing = next(i for i, (_, b) in enumerate(pairs) if b is None)
        raise BertKerasError(f"{where}: line {missing + 1} has no text_b but others do")
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
    from bert_keras.errors import BertKerasError
    from bert_keras.export.predict import load_predictor

    if args.batch_size < 1:
        raise BertKerasError(f"--batch-size must be >= 1, got {args.batch_size}")
    predictor = load_predictor(args.model, max_seq_len=args.max_seq_len)
    texts, texts_b = _read(args)
    if predictor.spec.get("task") == "multiple_choice" and texts_b is not None:
        texts_b = [json.loads(b) if isinstance(b, str) and b.lstrip().startswith("[") else b for b in texts_b]
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    # A progress bar when stdout is free (--output given) and there is more than one batch.
    progress = None
    if args.output and len(texts) > args.batch_size:
        import keras

        progress = keras.utils.Progbar(len(texts), unit_name="text")
    try:
        for record in _by_length(predictor, texts, texts_b, args.batch_size, progress):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    finally:
        if args.output:
            out.close()
    if args.output:
        print(f"wrote {len(texts)} predictions to {args.output}")
    return 0
