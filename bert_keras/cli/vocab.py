"""Build a WordPiece vocabulary from a text corpus (for pre-training from scratch).

Words are split exactly as `bert-keras tokenize` / `BertTokenizer` will split
them (Google's basic tokenization: cleaning, CJK, casing, punctuation), counted,
and given to tensorflow-text's WordPiece vocabulary learner.  The file starts
with the reserved tokens in this order: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3
[MASK]=4 (plus any --reserved you add), then the learned tokens; continuation
pieces start with "##".  The learner picks a count threshold that brings the
size near --size, so the result may be a little smaller.

The corpora must be UTF-8 text (a binary, UTF-16 or Latin-1 file is refused in one
line).  --out may replace a previous vocabulary file, never an input or another file.

examples:
  bert-keras vocab --input wiki.txt books.txt --out vocab.txt --size 30522
  bert-keras vocab --input corpus/*.txt --out vocab.txt --size 8000 --cased
"""

from __future__ import annotations

import os
import sys

from bert_keras.errors import BertKerasError, DataError


def add_arguments(parser):
    parser.add_argument("--input", nargs="+", required=True, metavar="FILE", help="plain-text files (UTF-8)")
    parser.add_argument("--out", required=True, metavar="PATH", help="vocabulary file to write")
    parser.add_argument("--size", type=int, default=30522, metavar="N", help="target vocabulary size (default 30522)")
    parser.add_argument("--cased", action="store_true", help="cased vocabulary (default: uncased)")
    parser.add_argument("--min-count", type=int, default=2, metavar="N", help="ignore words seen fewer times (default 2)")
    parser.add_argument("--reserved", nargs="*", default=[], metavar="TOKEN",
                        help="extra reserved tokens placed after [MASK], e.g. [unused0]")


def _lines(paths):
    for path in paths:
        with open(path, "rb") as f:
            yield from f


def run(args) -> int:
    from bert_keras.data.utf8 import check_utf8_text
    from bert_keras.output_files import check_output_file
    from bert_keras.locks import single_writer

    for path in args.input:
        if not os.path.isfile(path):
            raise DataError(f"input file not found: {path}")
        check_utf8_text(path)
    if args.size < 10:
        raise BertKerasError(f"--size must be at least 10, got {args.size}")
    check_output_file(args.out, "vocabulary", [("--input", path) for path in args.input])

    with single_writer(args.out):
        return _build(args)


def _build(args):
    from bert_keras.text.vocab import RESERVED_TOKENS, build_vocab, count_words, save_vocab

    print(f"counting words in {len(args.input)} file(s) ...", file=sys.stderr)
    counts = count_words(_lines(args.input), lower_case=not args.cased)
    print(f"{sum(counts.values())} words, {len(counts)} distinct; learning WordPiece ...", file=sys.stderr)
    reserved = list(RESERVED_TOKENS) + [t for t in args.reserved if t not in RESERVED_TOKENS]
    vocab = build_vocab([], vocab_size=args.size, lower_case=not args.cased, reserved_tokens=reserved,
                        min_count=args.min_count, word_counts=counts)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    save_vocab(vocab, args.out)
    print(f"wrote {len(vocab)} tokens to {args.out}", file=sys.stderr)
    return 0
