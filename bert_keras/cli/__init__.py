"""`bert-keras` command line.

Each subcommand lives in its own module of this package and exposes
``add_arguments(parser)`` and ``run(args) -> int``.  Errors for bad input are
one line on stderr with a non-zero exit status; ``--debug`` shows tracebacks.

TensorFlow's, absl's and LiteRT's own log lines are hidden unless ``--debug``
is given (see `quiet_native_logs`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import re
import sys
import threading
import warnings

# name -> (module, one-line help)
SUBCOMMANDS = {
    "demo": ("demo", "the main job on the embedded default data, end to end"),
    "pretrain": ("pretrain", "two-phase MLM+NSP pre-training (tf.distribute, or keras.distribution on JAX)"),
    "finetune": ("finetune", "fine-tune: classification, regression, ner, squad, squad2, multiple-choice"),
    "evaluate": ("evaluate", "evaluate a fine-tuned model folder on a data file"),
    "export": ("export", "export a model folder as SavedModel or TFLite"),
    "convert": ("convert", "convert checkpoints between Google, Hugging Face and bert-keras layouts"),
    "tokenize": ("tokenize", "WordPiece-tokenize lines from stdin into space-separated ids"),
    "vocab": ("vocab", "build a WordPiece vocabulary from a text corpus"),
    "pretraining-data": ("pretraining_data", "write pre-training examples as Google-format TFRecord shards"),
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


# A line of native (C++) logging: absl/glog ("W0000 00:00:1796159490.354522  7421 file.cc:364] ..."),
# TensorFlow's own ("2026-01-01 12:00:00.000000: I tensorflow/core/...cc:153] ..."), absl's
# pre-initialisation notice, LiteRT's ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.")
# and the second line of TensorFlow's CPU-feature notice.
NATIVE_LOG_LINE = re.compile(
    r"(?:[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\] "
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|(?:INFO|VERBOSE): "
    r"|WARNING: .*(?:TensorFlow Lite|XNNPACK|LiteRT)"
    r"|To enable the following instructions: .* rebuild TensorFlow)")


def _quiet_python_logs():
    """TensorFlow's and absl's Python loggers and warnings: errors only."""
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    # absl makes its logger class itself: set its verbosity through absl (no TensorFlow import)
    from absl import logging as absl_logging
    absl_logging.set_verbosity(absl_logging.ERROR)
    for module in ("tensorflow", "absl", "ai_edge_litert", "tensorflow_text"):
        warnings.filterwarnings("ignore", module=module)


@contextlib.contextmanager
def quiet_native_logs():
    """Drops native log lines written straight to file descriptor 2 while the block runs.

    The TFLite converter, XLA and LiteRT log through absl/glog in C++, which neither
    TF_CPP_MIN_LOG_LEVEL nor Python can silence.  So fd 2 becomes a pipe whose reader
    thread passes every other line on to the real stderr, while Python's `sys.stderr`
    writes to the real stderr directly (so error lines, progress and `isatty()` are
    unchanged).  Child processes inherit the filtered fd 2.
    """
    try:
        sys.stderr.flush()
        real = os.dup(2)
        read_end, write_end = os.pipe()
    except (OSError, AttributeError, ValueError):  # no usable fd 2: nothing to filter
        yield
        return
    os.dup2(write_end, 2)
    os.close(write_end)
    python_stderr = sys.stderr
    sys.stderr = open(real, "w", buffering=1, encoding=getattr(python_stderr, "encoding", None) or "utf-8",
                      errors="backslashreplace", closefd=False)

    def pump():
        pending = b""
        with open(read_end, "rb", buffering=0) as pipe:
            while True:
                chunk = pipe.read(65536)
                if not chunk:
                    break
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    if not NATIVE_LOG_LINE.match(line.decode("utf-8", "replace")):
                        os.write(real, line + b"\n")
        if pending and not NATIVE_LOG_LINE.match(pending.decode("utf-8", "replace")):
            os.write(real, pending)

    reader = threading.Thread(target=pump, name="bert-keras-stderr-filter", daemon=True)
    reader.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        sys.stderr = python_stderr
        os.dup2(real, 2)  # closes the pipe's last write end here: the reader sees end of file
        reader.join(timeout=5)  # a child still holding the pipe must not hang the exit
        os.close(real)


def main(argv=None) -> int:
    """`bert-keras ARGS`; argv None: the process's own arguments, with native logs filtered."""
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    # Level 3 also hides the C++ "failed call to cuInit" line on machines without a GPU.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if debug else "3")
    # Exports trace the model with TensorFlow: they run on TensorFlow's Keras backend whatever
    # KERAS_BACKEND says (a JAX or PyTorch user's shell).  Pre-training runs on the backend
    # KERAS_BACKEND names (jax: keras.distribution.DataParallel; torch: one device, said in its
    # first line), else on TensorFlow (tf.distribute), whatever keras.json says.
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    forced = words[:1] == ["export"] or (words[:1] == ["pretrain"]
                                         and os.environ.get("KERAS_BACKEND") not in ("jax", "torch"))
    if forced and "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = "tensorflow"
    if not debug:
        _quiet_python_logs()
    # Only as the process's entry point: an in-process caller keeps its own stderr.
    with quiet_native_logs() if argv is None and not debug else contextlib.nullcontext():
        code = _main(argv)
        if argv is None:
            _finish_uninterrupted()
    return code


def _finish_uninterrupted():
    """Once the command has ended, Ctrl-C no longer changes its exit status.

    Its outputs are complete and its result printed; what is left is the
    interpreter's and TensorFlow's teardown, which an interrupt would turn into
    exit status 130 and a traceback.
    """
    import signal

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals are not ours to set
        pass


def _main(argv) -> int:
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
        # one of ours raised inside a tf.data function reaches here wrapped in TensorFlow's error
        ours = re.search(r"\b(?:BertKerasError|CheckpointError|DataError): (.+?)(?:\s*\[\[|$)", str(e), re.M)
        if ours and not isinstance(e, BertKerasError):
            kind, msg = "error", ours.group(1)
        if getattr(e, "exit_code", None):  # a requested stop (SIGTERM), its work saved: not an error
            print(f"bert-keras {args.command}: {msg}", file=sys.stderr)
            return e.exit_code
        print(f"bert-keras {args.command}: {kind}: {msg}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
