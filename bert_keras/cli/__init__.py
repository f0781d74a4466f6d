"""`bert-keras` command line.

Each subcommand lives in its own module of this package and exposes
``add_arguments(parser)`` and ``run(args) -> int``.  Errors for bad input are
one line on stderr with a non-zero exit status; ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# name -> (module, one-line help)
SUBCOMMANDS = {
    "demo": ("demo", "the main job on the embedded default data, end to end"),
    "pretrain": ("pretrain", "two-phase MLM+NSP pre-training on a tf.distribute strategy"),
    "finetune": ("finetune", "fine-tune: classification, regression, ner, squad, squad2, multiple-choice"),
    "evaluate": ("evaluate", "evaluate a fine-tuned model folder on a data file"),
    "export": ("export", "export a model folder as SavedModel or TFLite"),
    "convert": ("convert", "convert checkpoints between Google, Hugging Face and bert-keras layouts"),
    "tokenize": ("tokenize", "WordPiece-tokenize lines from stdin into space-separated ids"),
    "vocab": ("vocab", "build a WordPiece vocabulary from a text corpus"),
    "predict": ("predict", "run an exported SavedModel or a model folder on text"),
}


EXAMPLES = """\
examples:
  bert-keras demo --fast
  bert-keras pretrain --config training/pretrain_mini_wiki.yaml --model-dir runs/mini_wiki
  bert-keras finetune --task classification --init minilm/ --train train.csv --eval dev.csv --model-dir runs/sst
  bert-keras export --model-dir runs/sst/best --out serving/sst/1
  bert-keras predict --model serving/sst/1 "a gorgeous, witty film."
  echo "Hello, world!" | bert-keras tokenize --vocab vocab.txt

`bert-keras COMMAND --help` shows each command's options and examples.
"""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (argparse prints the whole usage block first)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="bert-keras",
        description="BERT in TensorFlow 2 / Keras 3: pre-train, fine-tune, convert, export.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        try:
            mod = importlib.import_module(f"bert_keras.cli.{module}")
        except ModuleNotFoundError as e:  # subcommand not built yet
            if e.name != f"bert_keras.cli.{module}":
                raise
            continue
        p = sub.add_parser(
            name,
            help=help_text,
            description=(mod.__doc__ or help_text).strip(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        # SUPPRESS: an absent sub-command --debug must not reset `bert-keras --debug COMMAND`.
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show full tracebacks on errors")
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None) -> int:
    # Level 3 also hides the C++ "failed call to cuInit" line on machines without a GPU.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3" if "--debug" not in (argv or sys.argv) else "1")
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("bert-keras: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the CLI turns every failure into one line
        from bert_keras.errors import BertKerasError

        if args.debug:
            raise
        kind = "error" if isinstance(e, (BertKerasError, FileNotFoundError, ValueError)) else type(e).__name__
        msg = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
        print(f"bert-keras {args.command}: {kind}: {msg}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
