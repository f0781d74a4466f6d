"""The README's main job, `bert-keras demo`, in its fast mode (same path, 192 examples)."""

import json
import os
import subprocess
import sys

import pytest


def test_demo_fast_runs_end_to_end(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bert_keras", "demo", "--fast", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["train_examples"] == 192 and summary["dev_examples"] == 96
    # measured 67.71: six steps from MiniLM reach the dev set's majority class (65 of 96 fresh); a
    # broken pipeline (labels, tokens or weights scrambled) moves it by more than 6 examples
    assert summary["dev_accuracy"] == pytest.approx(67.71, abs=6.3)
    assert (tmp_path / "training_curve.png").stat().st_size > 10_000
    assert (tmp_path / "sentiment" / "best" / "model.safetensors").exists()
    assert len(summary["examples"]) == 3 and all(0 <= e["positive"] <= 1 for e in summary["examples"])
    # the export is part of the demo: it ran, and its outputs agree with the Keras model
    assert os.path.isdir(summary["saved_model_dir"]) and os.path.isfile(summary["tflite_text_path"])
    assert summary["max_abs_diff_vs_keras"] < 2.5e-7  # measured 2.4e-8
    assert "dev accuracy" in proc.stdout and "P(positive)=" in proc.stdout
