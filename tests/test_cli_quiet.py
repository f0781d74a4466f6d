"""The command line hides TensorFlow's, absl's and LiteRT's own log lines unless --debug is given.

The TFLite converter logs through absl in C++ straight to file descriptor 2
(`W0000 00:00:... tf_tfl_flatbuffer_helpers.cc:364] Ignored output_format.`) and LiteRT prints
`INFO: Created TensorFlow Lite XNNPACK delegate for CPU.`; neither listens to
TF_CPP_MIN_LOG_LEVEL.  These tests run the real `bert-keras` process on a tiny model.
"""

import json
import os
import subprocess
import sys

import pytest

# Markers of native log lines, independent of the CLI's own pattern.
NOISE_MARKERS = ("tf_tfl_flatbuffer_helpers", "absl::InitializeLog", "XNNPACK", "mlir_graph_optimization",
                 "W0000 ", "I0000 ", "cuda")

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "is", "a", "gorgeous", "mess",
          "witty", "and", "flat", "jokes", "fall", ",", ".", "##s", "##ly"]


def run_cli(*args, debug=False):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # the CLI's own default
    argv = [sys.executable, "-m", "bert_keras", *(["--debug"] if debug else []), *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)


def noise(stderr):
    return [line for line in stderr.splitlines() if any(m in line for m in NOISE_MARKERS)]


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    import keras

    import bert_keras as bk

    root = tmp_path_factory.mktemp("quiet")
    (root / "vocab.txt").write_text("\n".join(TOKENS) + "\n", encoding="utf-8")
    keras.utils.set_random_seed(0)
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=len(TOKENS), max_position_embeddings=32))
    bk.save_checkpoint(bk.BertClassifier(enc, num_classes=2), root / "clf", vocab_path=root / "vocab.txt",
                       metadata={"task": "classification", "labels": ["negative", "positive"], "max_seq_len": 16})
    return root


def test_the_pattern_drops_native_log_lines_and_keeps_the_programs_own():
    from bert_keras.cli import NATIVE_LOG_LINE

    dropped = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "W0000 00:00:1796159490.354522    7421 tf_tfl_flatbuffer_helpers.cc:364] Ignored output_format.",
        "I0000 00:00:1796159588.417482    9500 device_compiler.h:196] Compiled cluster using XLA!  This line "
        "is logged at most once for the lifetime of the process.",
        "2026-12-01 21:11:20.457666: E external/local_xla/xla/stream_executor/cuda/cuda_platform.cc:51] "
        "failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
        "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",
        "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow "
        "with the appropriate compiler flags.",
    ]
    kept = [
        "bert-keras convert: error: ckpt/vocab.txt: 30522 tokens but the model's token embedding has 100 rows",
        "exporting runs/sst/best as TFLite (int8) ...",
        "tokenized 1,000 lines",
        "Traceback (most recent call last):",
        "WARNING:absl:a Python-level warning the user asked for",
        "wiki.txt: 22 sentence(s) longer than seq_len - 3 tokens split into pieces",
    ]
    assert [line for line in dropped if not NATIVE_LOG_LINE.match(line)] == []
    assert [line for line in kept if NATIVE_LOG_LINE.match(line)] == []


@pytest.fixture(scope="module")
def quiet_export(classifier_dir):
    """`bert-keras export --format tflite` without --debug: (process, output folder)."""
    out = classifier_dir / "tflite"
    return run_cli("export", "--model-dir", classifier_dir / "clf", "--out", out, "--format", "tflite"), out


def test_tflite_export_prints_no_native_logs_and_debug_shows_them(classifier_dir, quiet_export, tmp_path):
    proc, _ = quiet_export
    assert proc.returncode == 0, proc.stderr
    assert noise(proc.stderr) == []
    assert proc.stderr.strip() == ""
    paths = json.loads(proc.stdout.strip().splitlines()[-1])
    assert os.path.getsize(paths["ids"]) > 100_000 and os.path.getsize(paths["text"]) > 100_000

    proc = run_cli("export", "--model-dir", classifier_dir / "clf", "--out", tmp_path / "loud", "--format", "tflite",
                   debug=True)
    assert proc.returncode == 0, proc.stderr
    assert any("tf_tfl_flatbuffer_helpers.cc" in line for line in noise(proc.stderr)), proc.stderr


def test_tflite_predict_is_quiet_and_errors_still_reach_stderr(quiet_export):
    proc, out = quiet_export
    assert proc.returncode == 0, proc.stderr

    proc = run_cli("predict", "--model", out / "model_text.tflite", "a gorgeous film", "the jokes fall flat")
    assert proc.returncode == 0, proc.stderr
    assert noise(proc.stderr) == [] and proc.stderr.strip() == ""
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["text"] for r in records] == ["a gorgeous film", "the jokes fall flat"]
    assert all(r["label"] in ("negative", "positive") for r in records)

    proc = run_cli("predict", "--model", out / "model.tflite", "a gorgeous film")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bert-keras predict: error: ") and "model.tflite" in lines[0], lines
