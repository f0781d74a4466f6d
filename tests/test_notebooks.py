"""The Colab notebooks, executed top to bottom on the CPU with tiny settings (papermill).

The three run as a chain, as a user would: pre-training writes ``final/``, fine-tuning
starts from it, export takes the fine-tuned classifier.  Each notebook gets its
parameters injected after its ``parameters`` cell, runs in a fresh kernel of this
interpreter, and the assertions read what it wrote.
"""

import json
import os
import pathlib
import sys

import numpy as np
import pytest

from tests.conftest import reference

papermill = reference("papermill")
nbformat = reference("nbformat")

COLAB = pathlib.Path(__file__).resolve().parent.parent / "colab"
NOTEBOOKS = ("pretraining.ipynb", "finetuning.ipynb", "export_serving.ipynb")

pytestmark = pytest.mark.slow


KERNEL = "bert-keras-tests"


@pytest.fixture(scope="module", autouse=True)
def kernel(tmp_path_factory):
    """A kernel spec that starts this interpreter, first on JUPYTER_PATH.

    The notebooks ask for "python3"; a user-level "python3" spec could point at another
    Python, so the tests name their own.
    """
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "bert-keras tests", "language": "python"}))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", os.pathsep.join([str(root), os.environ.get("JUPYTER_PATH", "")]).rstrip(os.pathsep))
        yield KERNEL


def execute(name, workdir, run="executed", **parameters):
    """Runs colab/NAME in ``workdir`` with ``parameters``; returns (executed notebook, all text output)."""
    out = workdir / f"{run}_{name}"
    papermill.execute_notebook(str(COLAB / name), str(out), parameters=parameters, kernel_name=KERNEL,
                               cwd=str(workdir), progress_bar=False, log_output=False, execution_timeout=600)
    nb = nbformat.read(str(out), as_version=4)
    text = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                text.append(output["text"])
            elif "data" in output and "text/plain" in output["data"]:
                text.append(output["data"]["text/plain"])
    return nb, "".join(text)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("notebooks")


@pytest.fixture(scope="module")
def pretrained(workdir):
    nb, text = execute(
        "pretraining.ipynb", workdir, preset="tiny", train_files="sample:wiki", heldout_every=10,
        model_dir=str(workdir / "pretrain"), phase1_steps=4, phase2_steps=2, batch_size=4, phase2_batch_size=2,
        warmup_steps=1, mixed_precision="none", steps_per_call=2, log_every=2, checkpoint_every=100,
        eval_batches=1, jax_steps=4, jax_host_devices=2)
    return workdir / "pretrain", text


@pytest.fixture(scope="module")
def finetuned(workdir, pretrained):
    nb, text = execute(
        "finetuning.ipynb", workdir, init=str(pretrained[0] / "final"), model_dir=str(workdir / "finetune"),
        data_dir=str(workdir / "data"), max_train_examples=32, max_eval_examples=24, classification_epochs=1,
        classification_batch_size=16, classification_max_seq_len=32, squad_epochs=1, squad_batch_size=8,
        squad_max_seq_len=96, doc_stride=48, mixed_precision="none")
    return workdir / "finetune", text


def test_committed_notebooks_are_stripped_and_parameterised():
    for name in NOTEBOOKS:
        nb = nbformat.read(str(COLAB / name), as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.outputs == [] and c.execution_count is None for c in code), f"{name}: outputs not stripped"
        tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{name}: needs exactly one cell tagged 'parameters'"
        assert nb.cells[0].cell_type == "markdown" and "colab.research.google.com" in nb.cells[0].source
        # The install cell runs pip only inside Colab.
        assert any('"google.colab" in sys.modules' in c.source and "pip" in c.source for c in code), name


def test_pretraining_notebook_runs_both_phases_and_writes_a_loadable_model(pretrained):
    import bert_keras as bk

    run_dir, text = pretrained
    assert "strategy: _DefaultDistributionStrategy, 1 replica(s)" in text
    logs = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["phase"], r["seq_len"]) for r in logs] == [(2, 1, 128), (4, 1, 128), (6, 2, 512)]
    assert all(np.isfinite(r["loss"]) and r["loss"] > 0 for r in logs)
    assert (run_dir / "loss_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    evals = json.loads((run_dir / "eval.json").read_text())
    assert evals["phase1"]["seq_len"] == 128 and evals["phase2"]["seq_len"] == 512
    assert "phase2 (step 6, length 512): MLM accuracy" in text
    pre = bk.load_checkpoint(run_dir / "final", task="pretraining")
    assert isinstance(pre, bk.BertPretrainer) and pre.encoder.config.num_layers == 2
    assert "the capital of france is [MASK] .  ->  " in text  # the fill-in cell ran on the reloaded model
    # the JAX section: the same runner with keras.distribution over two CPU devices, both phases,
    # its final/ read here on TensorFlow
    assert "backend: jax, DataParallel, 2 replica(s) on cpu:0, cpu:1" in text and "JAX: 4 steps, loss " in text
    jax_logs = [json.loads(line) for line in (run_dir / "jax" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["phase"], r["seq_len"]) for r in jax_logs][-1] == (2, 512)
    assert all(np.isfinite(r["loss"]) and r["loss"] > 0 for r in jax_logs)
    jax_evals = json.loads((run_dir / "jax" / "eval.json").read_text())  # held-out scoring, on JAX
    assert [jax_evals[p]["seq_len"] for p in ("phase1", "phase2")] == [128, 512]
    assert all(0 <= jax_evals[p]["nsp_accuracy"] <= 1 and jax_evals[p]["mlm_loss"] > 0 for p in jax_evals)
    assert f"{run_dir / 'jax'}/final: loaded on tensorflow, " in text
    jax_pre = bk.load_checkpoint(run_dir / "jax" / "final", task="pretraining")
    assert [w.shape for w in jax_pre.weights] == [w.shape for w in pre.weights]


def test_finetuning_notebook_classification_and_squad(finetuned):
    from bert_keras import finetuning, samples, tasks

    run_dir, text = finetuned
    clf = json.loads((run_dir / "classification" / "eval_results.json").read_text())
    assert clf["task"] == "classification" and clf["num_train_examples"] == 32 and clf["num_eval_examples"] == 24
    # The reported dev accuracy is the saved best model's accuracy on the real dev snippets the notebook wrote.
    dev = list(tasks.read_examples(run_dir.parent / "data" / "rotten_tomatoes_dev.tsv"))[:24]
    (_, _), (dev_texts, dev_labels) = samples.rotten_tomatoes_split(seed=0)
    assert [e.text_a for e in dev] == dev_texts[:24]
    assert [e.label for e in dev] == [["negative", "positive"][y] for y in dev_labels[:24]]
    again = finetuning.evaluate(run_dir / "classification" / "best", dev)
    assert again["accuracy"] == pytest.approx(clf["accuracy"], abs=1e-6)
    assert f"dev: accuracy {clf['accuracy']:.2f}" in text
    squad = json.loads((run_dir / "squad" / "eval_results.json").read_text())
    assert squad["task"] == "squad" and squad["num_eval_examples"] == 5
    assert 0 <= squad["exact_match"] <= squad["f1"] <= 100
    assert f"SQuAD dev: exact match {squad['exact_match']:.2f}, F1 {squad['f1']:.2f}" in text


def test_export_notebook_saved_model_and_tflite_match_keras(workdir, finetuned):
    run_dir, _ = finetuned
    export_dir = workdir / "export"
    nb, text = execute("export_serving.ipynb", workdir, model_dir=str(run_dir / "classification" / "best"),
                       export_dir=str(export_dir), max_seq_len=32)
    assert (export_dir / "saved_model" / "1" / "saved_model.pb").exists()
    assert not (export_dir / "saved_model" / "1" / "ids_only").exists()  # one folder, core ops only
    assert (export_dir / "tflite" / "model.tflite").stat().st_size > 0
    assert (export_dir / "tflite" / "model_text.tflite").stat().st_size > 0
    parity = json.loads((export_dir / "parity.json").read_text())
    assert parity["passed"] and parity["labels_agree"]
    assert len(parity["max_abs_difference"]) == 4 and max(parity["max_abs_difference"].values()) <= 1e-4
    assert "parity check passed" in text
    assert "signatures: ['serve_ids', 'serving_default']" in text
    # load_predictor's JSON lines, one per text, with the recorded labels
    records = [json.loads(line) for line in text.splitlines() if line.startswith('{"text"')]
    assert len(records) >= 3 and {r["label"] for r in records[-3:]} <= {"negative", "positive"}


def test_a_failing_cell_fails_the_run(workdir):
    """A notebook error is an error of the test run, naming the cell's exception."""
    with pytest.raises(papermill.PapermillExecutionError, match="unknown strategy 'warp'"):
        execute("pretraining.ipynb", workdir, run="failing", strategy="warp", model_dir=str(workdir / "never"))
    assert not os.path.exists(workdir / "never")
