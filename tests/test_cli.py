"""The `bert-keras` command line, run as a user runs it (a subprocess)."""

import subprocess
import sys

import pytest


def run_cli(*args, input=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "bert_keras", *map(str, args)], capture_output=True,
                          text=True, input=input, timeout=timeout)


def test_help_lists_the_subcommands():
    proc = run_cli("--help")
    assert proc.returncode == 0
    for name in ("convert", "tokenize"):
        assert name in proc.stdout


def test_convert_hugging_face_to_google_and_back(tmp_path, minilm_dir):
    proc = run_cli("convert", "--from", minilm_dir, "--to", tmp_path / "g", "--format", "google")
    assert proc.returncode == 0, proc.stderr
    assert "verified: max |difference| of outputs after reloading = 0.00e+00" in proc.stdout
    assert (tmp_path / "g" / "bert_model.ckpt.index").exists() and (tmp_path / "g" / "vocab.txt").exists()
    proc = run_cli("convert", "--from", tmp_path / "g", "--to", tmp_path / "hf", "--format", "huggingface")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "hf" / "model.safetensors").exists()


@pytest.mark.parametrize("args,message", [
    (("convert", "--from", "/no/such/folder", "--to", "out"), "checkpoint not found: /no/such/folder"),
])
def test_bad_input_is_one_line_without_traceback(args, message):
    proc = run_cli(*args)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1
