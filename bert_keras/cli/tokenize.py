"""WordPiece-tokenize lines from stdin; write space-separated ids, one line per line.

The ids are identical to Google's original BERT `FullTokenizer`
(`convert_tokens_to_ids(tokenize(line))`); input is read as UTF-8 and invalid
bytes are ignored, as Google does.  An empty output line means the input line
had no tokens.  Lines are processed in batches inside one compiled TensorFlow
function, so large files go fast; on a terminal, a running line count goes to stderr.

The vocabulary is checked first: more than 4,194,304 lines, bytes that are not
UTF-8 or control bytes are a one-line error naming the file and the line.  A
token on two lines gets the id of the later one, as in Google's load_vocab; a
warning line on stderr names the token and both lines.

examples:
  echo "Hello, world!" | bert-keras tokenize --vocab vocab.txt
  bert-keras tokenize --vocab vocab.txt --cased < corpus.txt > ids.txt
  bert-keras tokenize --vocab vocab.txt --tokens < corpus.txt      # pieces, not ids
"""

from __future__ import annotations

import sys

from bert_keras.cli._task_data import add_casing_arguments
from bert_keras.errors import BertKerasError


def add_arguments(parser):
    parser.add_argument("--vocab", required=True, metavar="V", help="WordPiece vocabulary file (one token per line)")
    add_casing_arguments(parser, default="the vocabulary folder's recorded casing, else inferred from the "
                                         "vocabulary: upper-case tokens mean cased; the choice goes to stderr")
    parser.add_argument(
        "--max-chars-per-word", type=int, default=200, metavar="N",
        help="longer words become [UNK] (Google: 200, Hugging Face: 100; default 200)",
    )
    parser.add_argument("--tokens", action="store_true", help="write WordPiece tokens instead of ids")
    parser.add_argument("--batch-size", type=int, default=2048, metavar="N", help="lines per TF call (default 2048)")


def _batches(stream, size):
    batch = []
    for line in stream:
        # keep the bytes as they are (Google decodes with errors="ignore")
        batch.append(line[:-1] if line.endswith(b"\n") else line)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def run(args) -> int:
    if args.batch_size < 1:
        raise BertKerasError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.max_chars_per_word < 1:
        raise BertKerasError(f"--max-chars-per-word must be >= 1, got {args.max_chars_per_word}")
    import os

    from bert_keras.checkpoints.casing import resolve_casing
    from bert_keras.text.vocab import load_vocab

    if not os.path.isfile(args.vocab):
        raise BertKerasError(f"{args.vocab}: vocabulary file not found")
    # The vocabulary is checked (size, UTF-8, control bytes) before anything is printed or
    # handed to TensorFlow: a wrong file is one error line, not a casing line of garbage.
    load_vocab(args.vocab)
    casing = resolve_casing(os.path.dirname(os.path.abspath(args.vocab)), vocab_path=args.vocab,
                            override=args.lower_case)
    print(f"{args.vocab}: {casing.describe()}", file=sys.stderr)  # stdout carries the ids
    import tensorflow as tf

    from bert_keras.text.tokenizer import BertTokenizer

    tok = BertTokenizer.from_vocab(args.vocab, lower_case=casing.lower_case,
                                   max_chars_per_word=args.max_chars_per_word)

    vocab = tf.constant(tok.vocab)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def lines_fn(lines):
        ids = tok.tokenize(lines)
        items = tf.gather(vocab, ids) if args.tokens else tf.strings.as_string(ids)
        return tf.strings.reduce_join(items, axis=-1, separator=" ")

    out = sys.stdout.buffer
    # stdout carries the ids; a running count goes to stderr when someone watches it.
    show = sys.stderr.isatty()
    done = 0
    for batch in _batches(sys.stdin.buffer, args.batch_size):
        joined = lines_fn(tf.constant(batch, dtype=tf.string)).numpy()
        out.write(b"\n".join(joined) + b"\n")
        done += len(batch)
        if show:
            print(f"\rtokenized {done:,} lines", end="", file=sys.stderr, flush=True)
    out.flush()
    if show:
        print(file=sys.stderr)
    return 0
