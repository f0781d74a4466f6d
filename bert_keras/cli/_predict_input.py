"""`predict`'s input: lines of text or JSON, read and checked a chunk at a time.

A line is plain text or a JSON object (``--format auto|text|jsonl``); `_resolve` turns a
chunk of lines into texts (and pair or choice texts), an error record per bad line.  Bad
input (undecodable bytes, a JSON key twice, a field of the wrong type) is an error naming
the file, line and field.
"""

import contextlib
import json
import sys


BLANK = "blank line: no text to classify"
CHUNK_LINES = 1024  # lines read, predicted and written at a time: memory stays bounded


class _Line:
    """One input line: its text and text_b (None: absent), or the error its record carries."""

    __slots__ = ("number", "text", "text_b", "json", "error")

    def __init__(self, number, text=None, text_b=None, json_line=False, error=None):
        self.number, self.text, self.text_b, self.json, self.error = number, text, text_b, json_line, error


def _loads(line, where):
    """One JSON value; duplicate keys (which would silently keep the last) are refused."""
    from bert_keras.errors import BertKerasError

    def no_duplicates(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise BertKerasError(f'{where}: key "{key}" appears twice in one JSON line')
            seen.add(key)
        return dict(pairs)

    try:
        return json.loads(line, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as e:
        raise BertKerasError(f"{where}: invalid JSON ({e.msg}); if the file is plain text, pass --format text") \
            from None


def _parse_line(line, where, number, fmt="auto"):
    """A `_Line` of an input line; JSON lines are parsed and their field types checked here.

    ``fmt``: "auto" (a line starting with "{" is JSON), "text" (every line is text) or
    "jsonl" (every line is a JSON object)."""
    from bert_keras.errors import BertKerasError
    from bert_keras.tasks.files import describe_json

    if not line.strip():
        return _Line(number, error=BLANK)
    if fmt == "text" or (fmt == "auto" and not line.lstrip().startswith("{")):
        return _Line(number, line)  # split on a TAB or not once the model says whether it takes pairs
    obj = _loads(line, where)
    if not isinstance(obj, dict):
        raise BertKerasError(f"{where}: {describe_json(obj)} where --format jsonl expects a JSON object")
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


def _decoded_lines(stream, where):
    """(number, line) of a stream, read as it comes: lines end at "\n" only (a trailing "\r"
    dropped; str.splitlines() would also cut at U+2028, U+0085, form feeds, ... inside a text
    and shift every later record), each decoded as UTF-8; a bad byte names `where` and the line."""
    from bert_keras.errors import BertKerasError

    for n, raw in enumerate(stream, 1):
        newline, cr = ("\n", "\r") if isinstance(raw, str) else (b"\n", b"\r")
        raw = raw[:-1] if raw.endswith(newline) else raw
        raw = raw[:-1] if raw.endswith(cr) else raw
        if isinstance(raw, str):  # an already decoded text stream (e.g. io.StringIO)
            yield n, raw
            continue
        try:
            yield n, raw.decode("utf-8-sig" if n == 1 else "utf-8")
        except UnicodeDecodeError as e:
            raise BertKerasError(f"{where}:{n}: not valid UTF-8 (byte {raw[e.start]:#04x} at column "
                                 f"{e.start + 1})") from None


@contextlib.contextmanager
def _open_input(args):
    """(where, the `_Line`s of --input or stdin, parsed as they are read)."""
    from bert_keras.errors import BertKerasError

    if args.input:
        try:
            f = open(args.input, "rb")
        except OSError as e:
            raise BertKerasError(f"{args.input}: cannot read ({e.strerror})") from e
        with f:
            where = args.input
            yield where, (_parse_line(line, f"{where}:{n}", n, args.format) for n, line in _decoded_lines(f, where))
    else:
        where = "<stdin>"
        stream = getattr(sys.stdin, "buffer", sys.stdin)
        yield where, (_parse_line(line, f"{where}:{n}", n, args.format) for n, line in _decoded_lines(stream, where))


def _chunks(lines, size):
    chunk = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


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


def _command_line_texts(args, multiple_choice=False):
    """(texts, texts_b or None) of the texts given on the command line."""
    from bert_keras.errors import BertKerasError

    texts = list(args.texts)
    b = args.text_b
    if b and len(b) == 1 and len(texts) > 1:
        b = b * len(texts)
    if b and len(b) != len(texts):
        raise BertKerasError(f"--text-b given {len(b)} times for {len(texts)} texts")
    if multiple_choice and b:
        b = [json.loads(x) if x.lstrip().startswith("[") else x for x in b]
    return texts, b
