"""Write pre-training examples as Google-format TFRecord shards (static masks).

The examples are the ones `pretrain` draws from text (`bert_keras.data.pretraining_dataset`:
Google's NSP pairs and 80/10/10 masking), made --dupe-factor times over the corpus, each
time with new pairs and new masks, as Google's `create_pretraining_data.py` does.  The shards
hold Google's features (input_ids, input_mask, segment_ids, masked_lm_positions,
masked_lm_ids, masked_lm_weights, next_sentence_labels), so Google's run_pretraining.py,
Model Garden's BertPretrainDataLoader and `pretrain` itself read them; they are
OUT/pretraining-00000-of-000NN.tfrecord plus OUT/pretraining_data.json (settings and counts).

OUT is written to a temporary sibling and renamed into place when complete; it may replace a
previous output of this command, never another non-empty folder or one holding an input.

examples:
  bert-keras pretraining-data --train-files wiki.txt --vocab vocab.txt --out shards/128 \\
      --seq-len 128 --max-predictions 20 --dupe-factor 5
  bert-keras pretraining-data --train-files corpus/*.txt --vocab vocab.txt --out shards/512 \\
      --seq-len 512 --max-predictions 80 --dupe-factor 2 --whole-word-masking --seed 7
"""

from __future__ import annotations

import os
import sys

from bert_keras.errors import BertKerasError, DataError

BATCH = 256


def add_arguments(parser):
    parser.add_argument("--train-files", nargs="+", required=True, metavar="FILE",
                        help="text in Google's format (one sentence a line, blank line between documents); globs")
    parser.add_argument("--vocab", required=True, metavar="PATH", help="WordPiece vocab.txt")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the shards")
    parser.add_argument("--seq-len", type=int, default=128, metavar="L", help="tokens an example (default 128)")
    parser.add_argument("--max-predictions", type=int, default=20, metavar="P",
                        help="masked-LM slots an example (default 20)")
    parser.add_argument("--dupe-factor", type=int, default=10, metavar="K",
                        help="passes over the text, each with new pairs and masks (default 10)")
    parser.add_argument("--whole-word-masking", action="store_true", help="mask all pieces of a word together")
    parser.add_argument("--cased", action="store_true", help="cased tokenization (default: uncased)")
    parser.add_argument("--seed", type=int, default=12345, help="random seed (default 12345)")
    parser.add_argument("--masked-lm-prob", type=float, default=0.15, metavar="F",
                        help="share of the text's tokens masked (default 0.15)")
    parser.add_argument("--short-seq-prob", type=float, default=0.1, metavar="F",
                        help="probability of a shorter example (default 0.1)")
    parser.add_argument("--examples-per-shard", type=int, default=100_000, metavar="N",
                        help="examples a shard (default 100000)")


def _check(args, inputs):
    for option, value, low in (("--dupe-factor", args.dupe_factor, 1), ("--examples-per-shard",
                                                                        args.examples_per_shard, 1)):
        if value < low:
            raise BertKerasError(f"{option} must be at least {low}, got {value}")
    if not 0.0 <= args.short_seq_prob <= 1.0:
        raise BertKerasError(f"--short-seq-prob must be in [0, 1], got {args.short_seq_prob}")
    if not 0.0 < args.masked_lm_prob <= 1.0:
        raise BertKerasError(f"--masked-lm-prob must be in (0, 1], got {args.masked_lm_prob}")
    if args.seq_len < 5 or not 1 <= args.max_predictions <= args.seq_len:
        raise BertKerasError(f"--seq-len must be at least 5 and --max-predictions in 1..--seq-len, got "
                             f"{args.seq_len} and {args.max_predictions}")
    if args.seed < 0:
        raise BertKerasError(f"--seed must be non-negative, got {args.seed}")
    out = os.path.realpath(args.out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise BertKerasError(f"{args.out}: exists and is not a folder")
    for option, path in inputs:
        real = os.path.realpath(path)
        if real == out or real.startswith(out.rstrip(os.sep) + os.sep):
            raise BertKerasError(f"{args.out}: holds the input {option} {path}; refusing to replace it "
                                 "(choose another --out)")


def _previous_output(folder):
    """Let ``folder`` be replaced only when it is a previous output of this command."""
    from bert_keras.data.tfrecord_writer import SHARD_PATTERN, SUMMARY_FILE
    from bert_keras.writing import foreign_entries

    foreign = foreign_entries(folder, names=(SUMMARY_FILE,), patterns=(SHARD_PATTERN,))
    if foreign or not os.path.isfile(os.path.join(folder, SUMMARY_FILE)):
        what = f"it holds {foreign[0]}" if foreign else f"it has no {SUMMARY_FILE}"
        raise BertKerasError(f"{folder}: is not a previous pretraining-data output ({what}); refusing to "
                             "replace it (remove it or choose another --out)")


def run(args) -> int:
    from bert_keras.data import corpus, tfrecord_writer, tfrecords
    from bert_keras.data.pretraining import pretraining_dataset
    from bert_keras.writing import atomic_folder, write_json

    files = corpus.resolve_files(args.train_files)
    shards = [p for p in files if tfrecords.is_tfrecord_file(p)]
    if shards:
        raise DataError(f"--train-files: {shards[0]} is a TFRecord file already; give text files")
    if not os.path.isfile(args.vocab):
        raise DataError(f"--vocab: vocabulary file not found: {args.vocab}")
    _check(args, [("--train-files", p) for p in files] + [("--vocab", args.vocab)])
    if os.path.isdir(args.out) and os.listdir(args.out):  # refused before the corpus is read
        _previous_output(args.out)
    vocab, index = corpus.read_vocab(args.vocab)
    dataset = pretraining_dataset(
        files, args.vocab, seq_len=args.seq_len, max_predictions=args.max_predictions, batch_size=BATCH,
        lower_case=not args.cased, whole_word_masking=args.whole_word_masking, seed=args.seed,
        masked_lm_prob=args.masked_lm_prob, short_seq_prob=args.short_seq_prob, repeat=args.dupe_factor,
        shuffle=True, drop_remainder=False)
    special = [index[t] for t in ("[CLS]", "[SEP]", "[PAD]", "[MASK]")]
    text = dataset.stats
    print(f"pretraining-data: {text.files} file(s), {text.documents:,} documents, {text.tokens:,} tokens; "
          f"{args.dupe_factor} pass(es) at seq_len {args.seq_len} ...", file=sys.stderr, flush=True)

    def progress(counts):
        print(f"pretraining-data: shard {counts['shards']} written, {counts['examples']:,} examples so far",
              file=sys.stderr, flush=True)

    with atomic_folder(args.out, may_replace=_previous_output) as tmp:
        counts = tfrecord_writer.write_shards(dataset.as_numpy_iterator(), tmp, args.examples_per_shard, special,
                                        progress)
        if not counts["examples"]:
            raise DataError(f"--train-files: no examples from {', '.join(files[:3])}")
        masked_share = counts["masked"] / max(1, counts["candidates"])
        write_json(os.path.join(tmp, tfrecord_writer.SUMMARY_FILE), {
            "format": "google-pretraining-tfrecord", "seq_len": args.seq_len,
            "max_predictions": args.max_predictions, "dupe_factor": args.dupe_factor, "seed": args.seed,
            "whole_word_masking": args.whole_word_masking, "lower_case": not args.cased,
            "masked_lm_prob": args.masked_lm_prob, "short_seq_prob": args.short_seq_prob,
            "vocab_size": len(vocab), "train_files": files, "masked_share": round(masked_share, 6),
            **{k: v for k, v in counts.items() if k != "files"}, "files": counts["files"]})
    print(f"wrote {counts['examples']:,} examples ({counts['tokens']:,} tokens, {100 * masked_share:.2f}% of "
          f"the text masked, {100 * counts['not_next'] / counts['examples']:.1f}% NotNext) in "
          f"{counts['shards']} shard(s) to {args.out}")
    return 0
