"""The two-phase pre-training runner on the JAX backend (`bert_keras.training.keras_runner`):
phases, metrics.jsonl, final/, resume after a kill, keras.distribution.DataParallel on two
host devices, the CLI, gradient accumulation.  Runs under KERAS_BACKEND=jax (`make test-jax`)."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

if keras.backend.backend() != "jax":
    pytest.skip("the JAX runner's tests need KERAS_BACKEND=jax", allow_module_level=True)

import bert_keras as bk  # noqa: E402
from bert_keras.errors import BertKerasError  # noqa: E402
from bert_keras.training import keras_runner  # noqa: E402
from bert_keras.training import pretrain as P  # noqa: E402
from bert_keras.training.pretrain import PretrainConfig, pretrain, read_metrics  # noqa: E402

WORDS = ("the a film movie plot is was good bad great awful fun witty dull mess jokes fall flat "
         "gorgeous moving deeply and but not it").split()
VOCAB = ["[PAD]"] + [f"[unused{i}]" for i in range(4)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + \
    [".", ",", "!", "'", "##s", "##ly", "##ing"]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    rng = np.random.default_rng(0)
    docs = ["\n".join(" ".join(rng.choice(WORDS, 6)) for _ in range(8)) for _ in range(8)]
    (folder / "corpus.txt").write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return folder


def _config(data, model_dir, **overrides):
    values = dict(preset="tiny", vocab=str(data / "vocab.txt"), train_files=str(data / "corpus.txt"),
                  model_dir=str(model_dir), phase1_steps=4, phase2_steps=0, phase1_seq_len=16,
                  phase1_max_predictions=3, phase2_seq_len=32, phase2_max_predictions=5, batch_size=4,
                  learning_rate=3e-3, warmup_steps=1, log_every=1, checkpoint_every=100, progress=False, seed=0)
    values.update(overrides)
    return PretrainConfig.from_dict(values)


def _checkpoint_values(folder):
    with np.load(os.path.join(folder, "model.npz")) as values:
        return [values[k] for k in sorted(values.files)]


def _batch(seq_len=16, predictions=3, seed=7):
    rng = np.random.default_rng(seed)
    return {"token_ids": rng.integers(0, len(VOCAB), (2, seq_len)).astype("int32"),
            "segment_ids": np.zeros((2, seq_len), "int32"), "padding_mask": np.ones((2, seq_len), "int32"),
            "masked_positions": rng.integers(1, seq_len, (2, predictions)).astype("int32")}


def test_two_phases_log_falling_losses_and_final_equals_the_trained_model(data, tmp_path, monkeypatch, capsys):
    trained = {}
    export = P.Run.export_final

    def keep_model(self):
        trained["model"] = self.model
        export(self)

    monkeypatch.setattr(P.Run, "export_final", keep_model)
    cfg = _config(data, tmp_path / "run", phase1_steps=24, phase2_steps=2, checkpoint_every=10, keep_checkpoints=2)
    result = pretrain(cfg)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "backend: jax, DataParallel, 1 replica(s) on cpu:0", out[0]
    assert result["step"] == result["trained_steps"] == 26 and result["replicas"] == 1

    records, torn = read_metrics(str(tmp_path / "run" / "metrics.jsonl"))
    assert not torn and [r["step"] for r in records] == list(range(1, 27))
    assert [r["seq_len"] for r in records] == [16] * 24 + [32] * 2 and [r["phase"] for r in records[-2:]] == [2, 2]
    losses = np.array([r["loss"] for r in records])
    assert np.isfinite(losses).all()
    for r in records:
        assert abs(r["loss"] - r["mlm_loss"] - r["nsp_loss"]) < 1e-5 and 0 <= r["mlm_accuracy"] <= 1
        assert r["learning_rate"] == pytest.approx(float(P.learning_rate_schedule(cfg)(r["step"] - 1)))
    # measured: 4.50 over the first 4 steps, 4.05 over the last 4 of phase 1 (batches of 4)
    assert losses[20:24].mean() < losses[:4].mean() - 0.25, losses
    # the last 2 of the checkpoints at 10, 20, 24 (end of phase 1) and 26 (end of phase 2)
    assert sorted(os.listdir(tmp_path / "run" / "checkpoints")) == ["step-24", "step-26"]

    final = bk.load_checkpoint(tmp_path / "run" / "final", task="pretraining")
    x = _batch(seq_len=32, predictions=5)
    ours = keras.ops.convert_to_numpy(trained["model"](x, training=False)["mlm_logits"])
    back = keras.ops.convert_to_numpy(final(x, training=False)["mlm_logits"])
    assert np.abs(ours - back).max() == 0.0
    # and the final model is the last checkpoint's
    last = _checkpoint_values(tmp_path / "run" / "checkpoints" / "step-26")
    assert all(np.array_equal(a, keras.ops.convert_to_numpy(v.value))
               for a, v in zip(last, trained["model"].variables))


def _killed_after_logging(monkeypatch, step):
    """The runner dies (as on kill -9, no cleanup of ours runs) once it has logged ``step``."""
    log = P.Run.log

    def killed(self, *args):
        log(self, *args)
        if self.step == step:
            raise KeyboardInterrupt

    monkeypatch.setattr(P.Run, "log", killed)


def test_a_killed_run_resumes_to_the_uninterrupted_result(data, tmp_path, monkeypatch, capsys):
    overrides = dict(phase1_steps=2, phase2_steps=4, checkpoint_every=3)
    uninterrupted = pretrain(_config(data, tmp_path / "a", **overrides))
    _killed_after_logging(monkeypatch, 5)  # logged, not checkpointed: the newest checkpoint is step 3
    with pytest.raises(KeyboardInterrupt):
        pretrain(_config(data, tmp_path / "b", **overrides))
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path / "b" / "checkpoints")) == ["step-2", "step-3"]
    capsys.readouterr()
    resumed = pretrain(_config(data, tmp_path / "b", **overrides))
    assert "resuming from " in capsys.readouterr().out
    assert resumed["trained_steps"] == 3 and resumed["step"] == uninterrupted["step"] == 6

    a = _checkpoint_values(tmp_path / "a" / "checkpoints" / "step-6")
    b = _checkpoint_values(tmp_path / "b" / "checkpoints" / "step-6")
    # measured: 0.0 (the same XLA programs on the same CPU); the bound leaves room for other hosts
    assert max(float(np.abs(x - y).max()) for x, y in zip(a, b)) < 1e-6
    la = [r["loss"] for r in read_metrics(str(tmp_path / "a" / "metrics.jsonl"))[0]]
    lb = [r["loss"] for r in read_metrics(str(tmp_path / "b" / "metrics.jsonl"))[0]]
    assert len(lb) == 6 and np.abs(np.array(la) - np.array(lb)).max() < 1e-6, (la, lb)

    again = pretrain(_config(data, tmp_path / "b", **overrides))  # finished: returns at once
    assert again["trained_steps"] == 0 and "already finished at step 6" in capsys.readouterr().out
    with pytest.raises(BertKerasError, match="other options"):
        pretrain(_config(data, tmp_path / "b", **{**overrides, "learning_rate": 1e-3}))


def test_tensorflow_runner_checkpoints_and_bad_options_are_one_line_errors(data, tmp_path):
    (tmp_path / "tf" / "checkpoints").mkdir(parents=True)
    (tmp_path / "tf" / "checkpoints" / "ckpt-3.index").write_bytes(b"")
    with pytest.raises(BertKerasError, match=r"earlier TensorFlow format \(ckpt-N\): convert them with "
                                             r"`KERAS_BACKEND=tensorflow bert-keras pretrain --config .*"
                                             r"pretrain_config.json --convert-checkpoints`"):
        pretrain(_config(data, tmp_path / "tf"))
    with pytest.raises(BertKerasError, match="differ"):
        pretrain(_config(data, tmp_path / "x", phase2_steps=2, gradient_accumulation_steps=2,
                         phase2_gradient_accumulation_steps=4))
    with pytest.raises(BertKerasError, match="multiworker"):
        pretrain(_config(data, tmp_path / "x", strategy="multiworker"))
    assert not (tmp_path / "x").exists()


def test_gradient_accumulation_steps_the_optimiser_once_per_k_micro_batches(data, tmp_path):
    cfg = _config(data, tmp_path / "run", phase1_steps=3, gradient_accumulation_steps=2, checkpoint_every=1)
    result = pretrain(cfg)
    assert result["step"] == 3
    records, _ = read_metrics(str(tmp_path / "run" / "metrics.jsonl"))
    assert [r["step"] for r in records] == [1, 2, 3] and all(r["batch_size"] == 4 for r in records)
    # the schedule runs per optimiser step, not per micro-batch
    schedule = P.learning_rate_schedule(cfg)
    assert [r["learning_rate"] for r in records] == pytest.approx([float(schedule(s)) for s in (0, 1, 2)])
    for step in (1, 3):
        state = json.loads((tmp_path / "run" / "checkpoints" / f"step-{step}" / "state.json").read_text())
        with np.load(tmp_path / "run" / "checkpoints" / f"step-{step}" / "optimizer.npz") as opt:
            index = [i for i, path in enumerate(state["optimizer_variables"]) if path.endswith("/iteration")]
            counter = 2 * int(opt[f"v{index[0]:05d}"])  # stored per optimiser step; Keras counts micro-batches
        assert state["step"] == step and counter == 2 * step and not any(
            path.endswith("_gradient_accumulator") for path in state["optimizer_variables"])
        # the optimiser's rate at its last micro-batch (the update) is the schedule's at the step
        rate = keras_runner.MicroStepSchedule(schedule, 2)(counter - 1)
        assert float(rate) == pytest.approx(float(schedule(step - 1))) and (step == 1 or float(rate) > 0)
    w1, w3 = (_checkpoint_values(tmp_path / "run" / "checkpoints" / f"step-{s}") for s in (1, 3))
    assert max(float(np.abs(x - y).max()) for x, y in zip(w1, w3)) > 1e-4  # it trained


TWO_DEVICES = """
import json, sys
from bert_keras.training.pretrain import PretrainConfig, pretrain, read_metrics
values = json.loads(sys.argv[1])
losses = {}
for strategy in ("auto", "cpu"):
    run = dict(values, strategy=strategy, model_dir=values["model_dir"] + "-" + strategy)
    pretrain(PretrainConfig.from_dict(run))
    losses[strategy] = [r["loss"] for r in read_metrics(run["model_dir"] + "/metrics.jsonl")[0]]
try:
    pretrain(PretrainConfig.from_dict(dict(values, batch_size=3, model_dir=values["model_dir"] + "-odd")))
except Exception as e:
    print("error:", e)
print("losses:", json.dumps(losses))
"""


def _environment(**extra):
    env = {**os.environ, "KERAS_BACKEND": "jax", "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu", **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    return env


def test_data_parallel_on_two_host_devices_gives_the_one_device_losses(data, tmp_path):
    values = _config(data, tmp_path / "run", phase1_steps=3).to_dict()
    proc = subprocess.run([sys.executable, "-c", TWO_DEVICES, json.dumps(values)], capture_output=True, text=True,
                          env=_environment(XLA_FLAGS="--xla_force_host_platform_device_count=2"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "backend: jax, DataParallel, 2 replica(s) on cpu:0, cpu:1", lines[0]
    assert "backend: jax, DataParallel, 1 replica(s) on cpu:0" in lines
    assert any(line.startswith("error: phase 1: micro-batch 3") and "not divisible by 2 devices" in line
               for line in lines), lines
    losses = json.loads(next(line for line in lines if line.startswith("losses:"))[len("losses:"):])
    # the same global batches, dropout masks and update on 2 devices as on 1; measured 4.8e-7
    assert len(losses["auto"]) == 3 and np.abs(np.subtract(losses["auto"], losses["cpu"])).max() < 5e-6, losses
    assert bk.load_checkpoint(tmp_path / "run-auto" / "final", task="pretraining") is not None


def test_cli_pretrain_on_jax_says_so_first_and_tensorflow_reads_its_folder(data, tmp_path):
    args = [sys.executable, "-m", "bert_keras", "pretrain", "--preset", "tiny", "--vocab", str(data / "vocab.txt"),
            "--train-files", str(data / "corpus.txt"), "--model-dir", str(tmp_path / "run"), "--phase1-steps", "2",
            "--phase2-steps", "0", "--phase1-seq-len", "16", "--phase1-max-predictions", "3", "--batch-size", "4",
            "--no-progress"]
    proc = subprocess.run(args, capture_output=True, text=True, env=_environment(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[0] == "backend: jax, DataParallel, 1 replica(s) on cpu:0", proc.stdout
    assert json.loads(proc.stdout[proc.stdout.index("{"):])["step"] == 2
    pre = bk.load_checkpoint(tmp_path / "run" / "final", task="pretraining")
    assert np.isfinite(keras.ops.convert_to_numpy(pre(_batch(), training=False)["mlm_logits"])).all()
    # one checkpoint format: TensorFlow reads the JAX run's checkpoints (and finds it finished)
    proc = subprocess.run(args, capture_output=True, text=True, env=_environment(KERAS_BACKEND="tensorflow"),
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pre-training already finished at step 2" in proc.stdout, proc.stdout
    # a PyTorch shell trains on PyTorch (one device, said first), not silently on TensorFlow
    args[args.index("--model-dir") + 1] = str(tmp_path / "run-torch")
    proc = subprocess.run(args, capture_output=True, text=True, env=_environment(KERAS_BACKEND="torch"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[0] == "backend: torch, one device, 1 replica(s) on cpu", proc.stdout


# The run uninterrupted into MODEL_DIR-a, and killed after logging step 3 into MODEL_DIR-b.
KILLED_AFTER_STEP_3 = """
import json, sys
import numpy as np
from bert_keras.training import pretrain as P
from bert_keras.training.pretrain import PretrainConfig, pretrain
values = json.loads(sys.argv[1])
pretrain(PretrainConfig.from_dict(dict(values, model_dir=values["model_dir"] + "-a")))
log = P.Run.log
def killed_after_step_3(self, *args):
    log(self, *args)
    if self.step == 3:
        raise KeyboardInterrupt
P.Run.log = killed_after_step_3
try:
    pretrain(PretrainConfig.from_dict(dict(values, model_dir=values["model_dir"] + "-b")))
except KeyboardInterrupt:
    print("killed")
P.Run.log = log
"""
ON_TORCH = KILLED_AFTER_STEP_3 + """
result = pretrain(PretrainConfig.from_dict(dict(values, model_dir=values["model_dir"] + "-b")))
weights = [np.load(values["model_dir"] + f"-{run}/checkpoints/step-4/model.npz") for run in "ab"]
print("resumed:", result["trained_steps"], max(float(np.abs(weights[0][k] - weights[1][k]).max()) for k in weights[0]))
"""


def test_pytorch_runs_the_same_runner_on_one_device_and_resumes(data, tmp_path):
    values = _config(data, tmp_path / "run", checkpoint_every=2).to_dict()
    proc = subprocess.run([sys.executable, "-c", ON_TORCH, json.dumps(values)], capture_output=True, text=True,
                          env=_environment(KERAS_BACKEND="torch"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "backend: torch, one device, 1 replica(s) on cpu", lines[0]
    assert "killed" in lines and any(line.startswith("resuming from ") for line in lines), lines
    trained, difference = lines[-1][len("resumed:"):].split()
    assert int(trained) == 2 and float(difference) < 1e-6, lines[-1]  # measured 0.0
    assert bk.load_checkpoint(tmp_path / "run-b" / "final", task="pretraining") is not None


def _tear_npz(folder):  # the machine died while model.npz was written
    path = folder / "model.npz"
    path.write_bytes(path.read_bytes()[:2000])


def _flip_a_byte(folder):  # a bit flipped on disk: the zip's CRC no longer matches
    path = folder / "optimizer.npz"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    path.write_bytes(bytes(raw))


def _garble_state(folder):
    (folder / "state.json").write_text('{"step": 4, "pha')


@pytest.fixture(scope="module")
def two_checkpoints(data, tmp_path_factory):
    """A finished 4-step run with checkpoints step-2 and step-4 (copied by each test that damages it)."""
    run = tmp_path_factory.mktemp("two_checkpoints") / "run"
    pretrain(_config(data, run, phase1_steps=4, checkpoint_every=2))
    return run


@pytest.mark.parametrize("damage, reason", [(_tear_npz, r"File is not a zip file|BadZipFile|truncated"),
                                            (_flip_a_byte, r"Bad CRC-32|Error -3|invalid"),
                                            (_garble_state, r"Unterminated string|Expecting")])
def test_an_unreadable_newest_checkpoint_is_named_and_the_one_before_resumes(data, two_checkpoints, tmp_path, capsys,
                                                                             damage, reason):
    run = tmp_path / "run"
    overrides = dict(phase1_steps=4, checkpoint_every=2)
    shutil.copytree(two_checkpoints, run)
    trained = _checkpoint_values(run / "checkpoints" / "step-4")
    damage(run / "checkpoints" / "step-4")
    capsys.readouterr()
    result = pretrain(_config(data, run, **overrides))
    out = capsys.readouterr().out
    assert re.search(rf"step-4: unreadable \(.*({reason}).*\); resuming from the checkpoint before it, .*step-2$",
                     out, re.M), out
    assert re.search(r"resuming from .*step-2 at step 2$", out, re.M), out
    assert result["trained_steps"] == 2 and os.listdir(run / "checkpoints" / "unreadable") == ["step-4"]
    again = _checkpoint_values(run / "checkpoints" / "step-4")
    assert all(np.array_equal(a, b) for a, b in zip(trained, again))  # as if it had never been damaged


def test_when_no_checkpoint_reads_nothing_is_moved_and_the_way_to_start_over_is_said(data, two_checkpoints, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(two_checkpoints, run)
    for step in (2, 4):
        _garble_state(run / "checkpoints" / f"step-{step}")
    with pytest.raises(BertKerasError, match=r"step-4: unreadable \(.*\), and no checkpoint before it reads either "
                                             r"\(2 tried\): to start this run over, move .*checkpoints away"):
        pretrain(_config(data, run, phase1_steps=4, checkpoint_every=2))
    assert sorted(os.listdir(run / "checkpoints")) == ["step-2", "step-4"]


def test_sigterm_saves_a_checkpoint_and_stops_with_the_line_to_resume(data, tmp_path, monkeypatch, capsys):
    from bert_keras.training.checkpoint_files import TrainingStopped

    run = tmp_path / "run"
    step = P.Run.train_call

    def terminated_after_step_3(self, *args):
        step(self, *args)
        if self.step == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # a real signal to this process, as a scheduler sends it

    monkeypatch.setattr(P.Run, "train_call", terminated_after_step_3)
    with pytest.raises(TrainingStopped, match=r"^stopped by SIGTERM at step 3: checkpoint .*step-3 saved; rerun the "
                                              r"same command to resume from it$") as stopped:
        pretrain(_config(data, run, phase1_steps=6))
    assert stopped.value.exit_code == 143 and sorted(os.listdir(run / "checkpoints")) == ["step-3"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    monkeypatch.undo()
    capsys.readouterr()
    result = pretrain(_config(data, run, phase1_steps=6))
    assert "at step 3" in capsys.readouterr().out and result["trained_steps"] == 3


TF_RUN = """
import json, sys
from bert_keras.training.pretrain import PretrainConfig, pretrain, read_metrics
values = json.loads(sys.argv[1])
pretrain(PretrainConfig.from_dict(values))
print("losses:", json.dumps([r["loss"] for r in read_metrics(values["model_dir"] + "/metrics.jsonl")[0]]))
"""


def test_accumulation_is_the_loss_of_one_k_times_larger_batch_as_on_tensorflow(data, tmp_path):
    # the same initial weights on both backends (their random generators differ), dropout 0
    init = tmp_path / "init"
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=len(VOCAB), dropout=0.0, attention_dropout=0.0))
    bk.save_checkpoint(bk.BertPretrainer(enc), str(init), vocab_path=str(data / "vocab.txt"))
    values = dict(_config(data, tmp_path / "tf", phase1_steps=4, gradient_accumulation_steps=2, batch_size=8,
                          warmup_steps=0, phase1_seq_len=64, phase1_max_predictions=10, eval_batches=2,
                          eval_files=str(data / "corpus.txt")).to_dict(), init=str(init), preset=None, vocab=None)
    proc = subprocess.run([sys.executable, "-c", TF_RUN, json.dumps(values)], capture_output=True, text=True,
                          env=_environment(KERAS_BACKEND="tensorflow"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    on_tf = json.loads(proc.stdout.split("losses:")[-1])
    pretrain(PretrainConfig.from_dict(dict(values, model_dir=str(tmp_path / "jax"))))
    on_jax = [r["loss"] for r in read_metrics(str(tmp_path / "jax" / "metrics.jsonl"))[0]]
    counts = []  # the two micro-batches of a step hold different numbers of MLM targets
    ds = bk.data.pretraining_dataset(str(data / "corpus.txt"), str(data / "vocab.txt"), seq_len=64,
                                     max_predictions=10, batch_size=4, seed=values["seed"] * 1000 + 1)
    for (_, labels), _ in zip(ds, range(8)):
        counts.append(int(np.sum(labels["masked_weights"])))
    assert any(a != b for a, b in zip(counts[::2], counts[1::2])), counts
    difference = np.abs(np.subtract(on_jax, on_tf)) / np.abs(on_tf)
    print(f"\nk=2, JAX vs TensorFlow: largest relative loss difference {difference.max():.1e}; counts {counts}")
    # measured 1.2e-7 (5.6e-4 when each micro-batch was normalised by its own count)
    assert len(on_jax) == 4 and difference.max() < 2e-6, (on_tf, on_jax)
    # the same on PyTorch (Keras' optimiser accumulating there too): measured 1.1e-7
    proc = subprocess.run([sys.executable, "-c", TF_RUN, json.dumps(dict(values, model_dir=str(tmp_path / "torch")))],
                          capture_output=True, text=True, env=_environment(KERAS_BACKEND="torch"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    on_torch = json.loads(proc.stdout.split("losses:")[-1])
    difference = np.abs(np.subtract(on_torch, on_tf)) / np.abs(on_tf)
    print(f"k=2, PyTorch vs TensorFlow: largest relative loss difference {difference.max():.1e}")
    assert len(on_torch) == 4 and difference.max() < 2e-6, (on_tf, on_torch)
    # one held-out evaluation: the same keys (the 80/10/10 split included) and values on both
    evals = [json.loads((tmp_path / run / "eval.json").read_text())["phase1"] for run in ("tf", "jax")]
    assert evals[0].keys() == evals[1].keys() and "mlm_accuracy_at_mask" in evals[1]
    gap = max(abs(evals[0][k] - evals[1][k]) for k in evals[0] if isinstance(evals[0][k], float))
    assert gap < 2e-7, evals  # measured 2.1e-8


STEPS_PER_CALL = """
import json, sys
import numpy as np
import bert_keras as bk
from bert_keras.training.pretrain import PretrainConfig, pretrain, read_metrics
values = json.loads(sys.argv[1])
executions, fit = [], bk.BertPretrainer.fit
def counted(self, x, *args, **kwargs):  # one entry per Keras fit: micro-batches and steps per execution
    micro_batches = len(x["token_ids"]) // kwargs["batch_size"] if isinstance(x, dict) else len(x)
    executions.append((micro_batches, self.steps_per_execution))
    return fit(self, x, *args, **kwargs)
bk.BertPretrainer.fit = counted
out = {}
for calls in (1, 3):
    folder = values["model_dir"] + f"-{calls}"
    executions.clear()
    pretrain(PretrainConfig.from_dict(dict(values, steps_per_call=calls, model_dir=folder)))
    with np.load(folder + "/checkpoints/step-6/model.npz") as w:
        weights = [w[k].tolist() for k in sorted(w.files)]
    out[calls] = {"losses": [r["loss"] for r in read_metrics(folder + "/metrics.jsonl")[0]],
                  "executions": list(executions), "weights": weights}
print("runs:", json.dumps(out))
"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_steps_per_call_runs_several_optimiser_steps_per_keras_call_with_the_same_result(data, tmp_path, backend):
    values = _config(data, tmp_path / "run", phase1_steps=6, gradient_accumulation_steps=2, log_every=3,
                     checkpoint_every=6).to_dict()
    proc = subprocess.run([sys.executable, "-c", STEPS_PER_CALL, json.dumps(values)], capture_output=True,
                          text=True, env=_environment(KERAS_BACKEND=backend), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = {int(k): v for k, v in json.loads(proc.stdout.split("runs:")[-1]).items()}
    # steps_per_call 1: six calls of one step (2 micro-batches); 3: two calls of three steps.  JAX
    # runs a call's micro-batches in one Keras execution; PyTorch allows one step per execution
    per_call = {1: 2, 3: 6} if backend == "jax" else {1: 1, 3: 1}
    assert runs[1]["executions"] == [[2, per_call[1]]] * 6 and runs[3]["executions"] == [[6, per_call[3]]] * 2
    losses = [np.array(runs[c]["losses"]) for c in (1, 3)]
    loss_gap = float(np.max(np.abs(losses[0] - losses[1]) / losses[0]))
    weight_gap = max(float(np.max(np.abs(np.subtract(a, b)))) for a, b in zip(runs[1]["weights"], runs[3]["weights"]))
    print(f"\n{backend}: steps_per_call 3 vs 1: losses {loss_gap:.1e} relative, weights {weight_gap:.1e}")
    # the same steps, so the same weights; the logs are the window's means summed on the device
    # (measured 3.9e-8 on JAX, 2.0e-8 on PyTorch)
    assert len(losses[0]) == 2 and loss_gap < 4e-7 and weight_gap == 0.0, runs


def test_a_jax_run_resumes_on_pytorch_and_continues_as_if_never_interrupted(data, tmp_path, monkeypatch):
    values = _config(data, tmp_path / "whole", phase1_steps=4, checkpoint_every=2,
                     model={"dropout": 0.0, "attention_dropout": 0.0}).to_dict()
    pretrain(PretrainConfig.from_dict(values))
    _killed_after_logging(monkeypatch, 3)  # logged, not checkpointed: the newest checkpoint is step 2
    with pytest.raises(KeyboardInterrupt):
        pretrain(PretrainConfig.from_dict(dict(values, model_dir=str(tmp_path / "moved"))))
    monkeypatch.undo()
    proc = subprocess.run([sys.executable, "-c", TF_RUN, json.dumps(dict(values, model_dir=str(tmp_path / "moved")))],
                          capture_output=True, text=True, env=_environment(KERAS_BACKEND="torch"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming from " in proc.stdout and "at step 2" in proc.stdout, proc.stdout
    whole = [r["loss"] for r in read_metrics(str(tmp_path / "whole" / "metrics.jsonl"))[0]]
    moved = json.loads(proc.stdout.split("losses:")[-1])
    difference = np.abs(np.subtract(moved, whole)) / np.abs(whole)
    weights = [_checkpoint_values(tmp_path / run / "checkpoints" / "step-4") for run in ("whole", "moved")]
    drift = max(float(np.abs(a - b).max()) for a, b in zip(*weights))
    print(f"\nJAX -> PyTorch: losses {difference.max():.1e} relative, weights {drift:.1e} from the JAX run's")
    assert len(moved) == 4 and difference.max() < 2e-6 and drift < 1e-6  # measured 1.1e-7 and 6.0e-8


def _follows(whole, moved, step=4):
    """Relative loss difference and largest weight difference of a moved run from the whole one."""
    losses = [[r["loss"] for r in read_metrics(str(run / "metrics.jsonl"))[0]] for run in (whole, moved)]
    assert len(losses[0]) == len(losses[1]) == step, losses
    weights = [_checkpoint_values(run / "checkpoints" / f"step-{step}") for run in (whole, moved)]
    return (float((np.abs(np.subtract(*losses)) / np.abs(losses[0])).max()),
            max(float(np.abs(a - b).max()) for a, b in zip(*weights)))


def test_a_tensorflow_run_resumes_on_jax_and_a_jax_run_on_tensorflow(data, tmp_path, monkeypatch):
    """One checkpoint format: killed after its step-2 checkpoint, a run goes on on the other backend
    (on TensorFlow with k=2 accumulated micro-batches, the Keras optimiser's counter and empty
    accumulators on JAX) and logs the uninterrupted run's losses."""
    values = _config(data, tmp_path / "tf", phase1_steps=4, checkpoint_every=2, batch_size=8,
                     gradient_accumulation_steps=2, model={"dropout": 0.0, "attention_dropout": 0.0}).to_dict()
    proc = subprocess.run([sys.executable, "-c", KILLED_AFTER_STEP_3, json.dumps(values)], capture_output=True,
                          text=True, env=_environment(KERAS_BACKEND="tensorflow"), timeout=600)
    assert proc.returncode == 0 and "killed" in proc.stdout, proc.stderr[-3000:]
    assert sorted(os.listdir(tmp_path / "tf-b" / "checkpoints")) == ["step-2"]
    resumed = pretrain(PretrainConfig.from_dict(dict(values, model_dir=str(tmp_path / "tf-b"))))
    assert resumed["trained_steps"] == 2
    losses, weights = _follows(tmp_path / "tf-a", tmp_path / "tf-b")
    print(f"\nTensorFlow -> JAX (k=2): losses {losses:.1e} relative, weights {weights:.1e} from TensorFlow's run")
    assert losses < 1e-6 and weights < 2e-6  # measured 5.3e-8 and 1.2e-7

    values = dict(values, gradient_accumulation_steps=1, batch_size=4, model_dir=str(tmp_path / "jax-whole"))
    pretrain(PretrainConfig.from_dict(values))
    _killed_after_logging(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        pretrain(PretrainConfig.from_dict(dict(values, model_dir=str(tmp_path / "jax-moved"))))
    monkeypatch.undo()
    moved = dict(values, model_dir=str(tmp_path / "jax-moved"))
    proc = subprocess.run([sys.executable, "-c", TF_RUN, json.dumps(moved)], capture_output=True, text=True,
                          env=_environment(KERAS_BACKEND="tensorflow"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming from " in proc.stdout and "at step 2" in proc.stdout, proc.stdout
    losses, weights = _follows(tmp_path / "jax-whole", tmp_path / "jax-moved")
    print(f"JAX -> TensorFlow: losses {losses:.1e} relative, weights {weights:.1e} from JAX's run")
    assert losses < 1e-6 and weights < 1e-6  # measured 1.1e-7 and 6.0e-8


JOB_PROCESS = """
import json, sys
from bert_keras.training.pretrain import PretrainConfig, pretrain
result = pretrain(PretrainConfig.from_dict(json.loads(sys.argv[1])))
print("result:", json.dumps({"step": result["step"], "replicas": result["replicas"]}))
"""


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_jax_processes_on_loopback_train_as_one_process_does(data, tmp_path):
    values = _config(data, tmp_path / "one", phase1_steps=3, phase2_steps=1, checkpoint_every=2,
                     eval_batches=1, eval_files=str(data / "corpus.txt")).to_dict()
    pretrain(PretrainConfig.from_dict(values))
    job = dict(values, model_dir=str(tmp_path / "job"))
    address = f"127.0.0.1:{_free_port()}"
    procs = [subprocess.Popen([sys.executable, "-c", JOB_PROCESS, json.dumps(job)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_environment(
                                  KERAS_DISTRIBUTION_JOB_ADDRESSES=address, KERAS_DISTRIBUTION_NUM_PROCESSES="2",
                                  KERAS_DISTRIBUTION_PROCESS_ID=str(i)))
             for i in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-3000:] for _, err in outputs]
    printed = [[line for line in out.splitlines() if not line.startswith("[Gloo]")] for out, _ in outputs]
    assert printed[0][0].startswith("backend: jax, DataParallel, 2 replica(s) on cpu:0, "), printed[0]
    assert printed[0][0].endswith("(2 processes)") and len(printed[1]) == 1  # process 1 prints only its result
    one = [r["loss"] for r in read_metrics(str(tmp_path / "one" / "metrics.jsonl"))[0]]
    two = [r["loss"] for r in read_metrics(str(tmp_path / "job" / "metrics.jsonl"))[0]]
    losses = float(np.max(np.abs(np.subtract(one, two)) / np.abs(one)))
    a, b = (bk.load_checkpoint(tmp_path / run / "final", task="pretraining") for run in ("one", "job"))
    weights = max(float(np.abs(keras.ops.convert_to_numpy(x) - keras.ops.convert_to_numpy(y)).max())
                  for x, y in zip(a.weights, b.weights))
    evals = [json.loads((tmp_path / run / "eval.json").read_text())["phase2"] for run in ("one", "job")]
    gap = max(abs(evals[0][k] - evals[1][k]) for k in evals[0] if isinstance(evals[0][k], float))
    print(f"\n2 processes vs 1: losses {losses:.1e} relative, weights {weights:.1e}, held-out {gap:.1e}")
    assert len(two) == 4 and losses < 1e-6 and weights < 2e-6 and gap < 1e-6  # measured 1.1e-7, 1.5e-7, 7.7e-8
    assert sorted(os.listdir(tmp_path / "job" / "checkpoints")) == ["step-2", "step-3", "step-4"]


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_runner_follows_hugging_face_and_torch_adamw_step_for_step_on_this_backend(backend, tmp_path):
    """The runner's step on JAX or PyTorch (`KerasSteps`) against transformers' BertForPreTraining with
    torch.optim.AdamW, from the same random BERT-tiny on the same batches: 90 steps at 128 tokens
    and 10 at 512 (training/adam_rule_trajectories.py; TensorFlow's runner in test_pretrain_trajectory)."""
    out = tmp_path / "trajectory"
    proc = subprocess.run([sys.executable, os.path.join(REPO, "training", "adam_rule_trajectories.py"),
                           "--steps", "100", "--batch", "4", "--rules", "torch", "--accumulation", "1",
                           "--workdir", str(tmp_path / "work"), "--out", str(out)],
                          capture_output=True, text=True, env=_environment(KERAS_BACKEND=backend), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(out.with_suffix(".json").read_text())["runs"][0]
    print(f"\n{backend}: first 20 max rel {run['max_relative_first_steps']:.2e}, 50-step means max rel "
          f"{run['max_relative_window_mean']:.2e}, final {run['final_ours']:.5f} vs {run['final_reference']:.5f}")
    assert run["ours"][-1] < run["ours"][0] - 0.5  # it learns: not two flat lines
    # measured: first 20 steps 3.1e-7 (JAX) and 3.6e-7 (PyTorch), window means 5.2e-8 and 9.3e-8
    assert run["max_relative_first_steps"] < 4e-6
    assert run["max_relative_window_mean"] < 1e-6


def test_a_run_on_a_remote_file_system_resumes_to_the_uninterrupted_local_result(data, tmp_path, monkeypatch,
                                                                                  capsys):
    """model_dir through TensorFlow's file system (``ram://``, as ``gs://``) on JAX: checkpoints,
    metrics.jsonl and final/ land there, and a killed run resumes from them."""
    import io

    import tensorflow as tf

    overrides = dict(phase1_steps=2, phase2_steps=4, checkpoint_every=3)
    local = pretrain(_config(data, tmp_path / "a", **overrides))
    remote = "ram://jax_run"
    _killed_after_logging(monkeypatch, 5)
    with pytest.raises(KeyboardInterrupt):
        pretrain(_config(data, remote, **overrides))
    monkeypatch.undo()
    assert sorted(n.rstrip("/") for n in tf.io.gfile.listdir(f"{remote}/checkpoints")) == ["step-2", "step-3"]
    capsys.readouterr()
    resumed = pretrain(_config(data, remote, **overrides))
    assert "resuming from " in capsys.readouterr().out
    assert resumed["trained_steps"] == 3 and resumed["step"] == local["step"] == 6
    with tf.io.gfile.GFile(f"{remote}/checkpoints/step-6/model.npz", "rb") as f, \
            np.load(io.BytesIO(f.read())) as values:
        there = [values[k] for k in sorted(values.files)]
    here = _checkpoint_values(tmp_path / "a" / "checkpoints" / "step-6")
    # measured: 0.0 (the same XLA programs); as the local resume test's bound
    assert max(float(np.abs(x - y).max()) for x, y in zip(here, there)) < 1e-6
    with tf.io.gfile.GFile(f"{remote}/metrics.jsonl") as f:
        remote_losses = [json.loads(line)["loss"] for line in f.read().splitlines()]
    local_losses = [r["loss"] for r in read_metrics(str(tmp_path / "a" / "metrics.jsonl"))[0]]
    assert len(remote_losses) == 6 and np.abs(np.array(local_losses) - np.array(remote_losses)).max() < 1e-6
    # final/ lands there too (written locally, copied up, bert_keras.json last) and reads back
    copied = tmp_path / "final_copied_down"
    copied.mkdir()
    for name in tf.io.gfile.listdir(f"{remote}/final"):
        tf.io.gfile.copy(f"{remote}/final/{name}", str(copied / name))
    x = _batch(seq_len=32, predictions=5)
    ours = bk.load_checkpoint(tmp_path / "a" / "final", task="pretraining")(x, training=False)["mlm_logits"]
    back = bk.load_checkpoint(copied, task="pretraining")(x, training=False)["mlm_logits"]
    # measured: 0.0
    assert np.abs(keras.ops.convert_to_numpy(ours) - keras.ops.convert_to_numpy(back)).max() < 1e-6
