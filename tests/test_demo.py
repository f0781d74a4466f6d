"""The README's main job, `bert-keras demo`, in its fast mode (same path, 192 examples)."""

import json
import subprocess
import sys


def test_demo_fast_runs_end_to_end(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bert_keras", "demo", "--fast", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["train_examples"] == 192 and summary["dev_examples"] == 96
    assert 0 <= summary["dev_accuracy"] <= 100
    assert (tmp_path / "training_curve.png").stat().st_size > 10_000
    assert (tmp_path / "sentiment" / "best" / "model.safetensors").exists()
    assert len(summary["examples"]) == 3 and all(0 <= e["positive"] <= 1 for e in summary["examples"])
    if "saved_model_dir" in summary:  # the exporter ran: its outputs agree with the Keras model
        assert summary["max_abs_diff_vs_keras"] < 1e-4
    assert "dev accuracy" in proc.stdout and "P(positive)=" in proc.stdout
