"""Pre-training refuses, before it trains, what would train backwards, on nothing, or on bytes; and
survives what stops it: torn checkpoints, a full disk, SIGTERM."""

import json
import os
import re
import signal
import subprocess

import numpy as np
import pytest
import tensorflow as tf

import bert_keras as bk
from bert_keras.errors import BertKerasError
from bert_keras.training.pretrain import NonFiniteLossError, pretrain
from bert_keras.writing import DiskFullError
from bert_keras.training.pretrain_config import PretrainConfig
from tests.test_pretrain import corpus, run_config  # noqa: F401 - the module's corpus fixture


@pytest.mark.parametrize("field, value, message", [
    ("phase2_learning_rate", -1e-2, "phase2_learning_rate must be positive, got -0.01"),  # trained phase 2 backwards
    ("phase2_learning_rate", float("nan"), "phase2_learning_rate must be a finite number, got nan"),
    ("learning_rate", float("inf"), "learning_rate must be a finite number, got inf"),
    ("weight_decay", float("nan"), "weight_decay must be a finite number, got nan"),
    ("weight_decay", -0.1, "weight_decay must be >= 0, got -0.1"),
    ("end_learning_rate", -1.0, "end_learning_rate must be >= 0, got -1.0"),
    ("clipnorm", 0.0, "clipnorm must be positive or null, got 0.0"),
    ("warmup_steps", -5, "warmup_steps must be a non-negative integer or null, got -5"),
])
def test_rates_and_decays_are_validated_up_front(corpus, tmp_path, field, value, message):  # noqa: F811
    values = run_config(corpus, tmp_path / "run", schedule="per_phase", phase2_steps=2, **{field: value})
    with pytest.raises(BertKerasError, match="^config: " + message.replace("(", r"\(").replace(")", r"\)")):
        PretrainConfig.from_dict(values)


def test_a_missing_eval_file_is_refused_before_phase_one_trains(corpus, tmp_path):  # noqa: F811
    cfg = PretrainConfig.from_dict(run_config(corpus, tmp_path / "run", eval_batches=1,
                                              eval_files=str(tmp_path / "held_out.txt")))
    with pytest.raises(BertKerasError, match=r"^eval_files: pre-training file not found: .*held_out\.txt$"):
        pretrain(cfg)
    assert not os.path.exists(tmp_path / "run" / "checkpoints")  # nothing trained


def test_a_utf16_or_binary_corpus_is_refused_in_one_line(corpus, tmp_path):  # noqa: F811
    utf16 = tmp_path / "corpus16.txt"
    utf16.write_text("The quick brown fox.\nJumps over the dog.\n", encoding="utf-16")
    cfg = PretrainConfig.from_dict(run_config(corpus, tmp_path / "run", train_files=str(utf16)))
    with pytest.raises(BertKerasError,
                       match=r"^train_files: .*corpus16\.txt:1: corpus is UTF-16 \(byte-order mark ff fe\), not UTF-8"):
        pretrain(cfg)
    binary = tmp_path / "shard.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(BertKerasError, match=r"shard\.bin:1: corpus is not UTF-8 text"):
        bk.data.pretraining_dataset([str(binary)], corpus[1], seq_len=32, max_predictions=5, batch_size=2)


def test_pretraining_into_a_log_writes_plain_progress_lines_without_terminal_codes(corpus, tmp_path, capsys):  # noqa: F811
    pretrain(PretrainConfig.from_dict(run_config(corpus, tmp_path / "run", progress=True)))
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out
    assert re.search(r"^4/4 steps, loss \d+\.\d{4}, .*steps/s$", out, re.M), out  # the run's 4 steps


def _train(corpus, run, **overrides):  # noqa: F811
    return pretrain(PretrainConfig.from_dict(run_config(corpus, run, **overrides)))


def _variables(folder):
    with np.load(folder / "model.npz") as model, np.load(folder / "optimizer.npz") as optimizer:
        return {**{f"model/{k}": model[k] for k in model.files}, **{f"optimizer/{k}": optimizer[k] for k in optimizer.files}}


def as_earlier_format(corpus, run, **overrides):  # noqa: F811
    """Rewrites a run's step-N checkpoints the way the earlier TensorFlow runner wrote them: a
    tf.train.Checkpoint of the model, the optimiser, the step, the phase and dropout's seed states,
    saved by a tf.train.CheckpointManager as ckpt-N."""
    import shutil

    from bert_keras.training import keras_checkpoints
    from bert_keras.training import pretrain as P

    from bert_keras.training.tensorflow_steps import TensorFlowSteps

    cfg = PretrainConfig.from_dict(run_config(corpus, run, **overrides))
    job = P.Run(cfg, TensorFlowSteps(cfg))
    job.resolve_model()
    folders, job.checkpoints, job.latest = keras_checkpoints.step_folders(str(run / "checkpoints")), [], None
    job.build_state()
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    phase = tf.Variable(1, dtype=tf.int64, trainable=False, name="phase")
    seed_states = [v for v in job.model.variables if "seed_generator" in v.path]
    checkpoint = tf.train.Checkpoint(model=job.model, optimizer=job.optimizer, step=step, phase=phase,
                                     seed_states=seed_states)
    manager = tf.train.CheckpointManager(checkpoint, str(run / "checkpoints"), max_to_keep=None)
    for folder in folders:
        job.restore(folder)
        step.assign(job.step)
        phase.assign(job.phase)
        manager.save(checkpoint_number=job.step)
        shutil.rmtree(folder)


def _old_variables(prefix):
    reader = tf.train.load_checkpoint(str(prefix))
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map() if k != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def test_a_torn_newest_checkpoint_is_named_set_aside_and_the_one_before_resumes(corpus, tmp_path, capsys):  # noqa: F811
    run = tmp_path / "run"
    _train(corpus, run, phase1_steps=6)
    trained = _variables(run / "checkpoints" / "step-6")
    torn = run / "checkpoints" / "step-6" / "model.npz"
    torn.write_bytes(torn.read_bytes()[:1000])  # the machine died while the file was written
    capsys.readouterr()
    result = _train(corpus, run, phase1_steps=6)
    out = capsys.readouterr().out
    assert re.search(r"step-6: unreadable \(.*\); resuming from the checkpoint before it, .*step-4$", out, re.M), out
    assert re.search(r"resuming from .*step-4 at step 4$", out, re.M), out
    assert result["step"] == 6 and result["trained_steps"] == 2
    assert sorted(os.listdir(run / "checkpoints" / "unreadable")) == ["step-6"]
    again = _variables(run / "checkpoints" / "step-6")
    assert again.keys() == trained.keys() and [k for k in again if not np.array_equal(again[k], trained[k])] == []


def test_a_torn_newest_checkpoint_of_the_earlier_format_is_set_aside_and_the_one_before_resumes(
        corpus, tmp_path, capsys):  # noqa: F811
    run = tmp_path / "run"
    _train(corpus, run, phase1_steps=6)
    trained = _variables(run / "checkpoints" / "step-6")
    as_earlier_format(corpus, run, phase1_steps=6)
    torn = run / "checkpoints" / "ckpt-6.data-00000-of-00001"
    torn.write_bytes(torn.read_bytes()[:1000])
    capsys.readouterr()
    result = _train(corpus, run, phase1_steps=6)
    out = capsys.readouterr().out
    assert re.search(r"ckpt-6: unreadable \(Read less bytes than requested\); resuming from the checkpoint before "
                     r"it, .*ckpt-4$", out, re.M), out
    assert re.search(r"resuming from .*ckpt-4 at step 4$", out, re.M), out
    assert result["step"] == 6 and result["trained_steps"] == 2
    assert sorted(os.listdir(run / "checkpoints" / "unreadable")) == ["ckpt-6.data-00000-of-00001", "ckpt-6.index"]
    # the run goes on in the one format: its step-6 is the uninterrupted run's
    again = _variables(run / "checkpoints" / "step-6")
    assert again.keys() == trained.keys() and [k for k in again if not np.array_equal(again[k], trained[k])] == []


def test_the_convert_command_writes_the_earlier_formats_newest_checkpoint_in_the_one_format(
        corpus, tmp_path, capsys):  # noqa: F811
    from bert_keras.cli import main

    run = tmp_path / "run"
    _train(corpus, run)
    trained = _variables(run / "checkpoints" / "step-4")
    as_earlier_format(corpus, run)
    assert not (run / "checkpoints" / "step-4").exists()
    capsys.readouterr()
    assert main(["pretrain", "--config", str(run / "pretrain_config.json"), "--convert-checkpoints"]) == 0
    assert re.search(r"step-4: written from the earlier format's checkpoint of step 4$", capsys.readouterr().out, re.M)
    again = _variables(run / "checkpoints" / "step-4")  # what every backend resumes, equal to the run's own
    assert again.keys() == trained.keys() and [k for k in again if not np.array_equal(again[k], trained[k])] == []
    assert _train(corpus, run)["trained_steps"] == 0  # and the run is finished, as before


def test_a_garbled_checkpoint_index_file_does_not_start_the_run_over(corpus, tmp_path, capsys):  # noqa: F811
    run = tmp_path / "run"
    _train(corpus, run)
    as_earlier_format(corpus, run)
    (run / "checkpoints" / "checkpoint").write_text("garbage {{{")  # tf.train.latest_checkpoint says None
    capsys.readouterr()
    result = _train(corpus, run)
    assert "pre-training already finished at step 4" in capsys.readouterr().out
    assert result["trained_steps"] == 0
    assert tf.train.latest_checkpoint(str(run / "checkpoints")).endswith("ckpt-4")  # the index file mended


def test_when_no_checkpoint_reads_the_run_is_refused_with_the_command_to_start_over(corpus, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    _train(corpus, run)
    for step in (2, 4):
        (run / "checkpoints" / f"step-{step}" / "optimizer.npz").write_bytes(b"not an npz")
    with pytest.raises(BertKerasError, match=r"step-4: unreadable \(.*\), and no checkpoint before it "
                                             r"reads either \(2 tried\): to start this run over, move .*checkpoints "
                                             r"away \(mv .*checkpoints .*checkpoints\.unreadable\)$"):
        _train(corpus, run)
    assert sorted(os.listdir(run / "checkpoints")) == ["step-2", "step-4"]  # nothing moved, nothing overwritten
    assert (run / "checkpoints" / "step-4" / "optimizer.npz").read_bytes() == b"not an npz"


def test_a_nan_before_any_checkpoint_says_none_was_kept(corpus, tmp_path):  # noqa: F811
    with pytest.raises(NonFiniteLossError, match=r"^loss is nan at step \d \(phase 1\); training stopped, no checkpoint "
                                                 r"was written yet in .*checkpoints$"):
        _train(corpus, tmp_path / "run", learning_rate=1e30, checkpoint_every=4)


def test_sigterm_saves_a_checkpoint_and_exits_143_with_the_line_to_resume(corpus, tmp_path, monkeypatch, capsys):  # noqa: F811
    from bert_keras.cli import main
    from bert_keras.training import pretrain as P

    run = tmp_path / "run"
    config = tmp_path / "run.json"
    config.write_text(json.dumps(run_config(corpus, run, phase1_steps=6, log_every=1, checkpoint_every=4)))
    original = P.Run.train_call

    def terminated_after_step_3(self, *args):
        original(self, *args)
        if self.step == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # what a scheduler sends: a real signal to this process

    monkeypatch.setattr(P.Run, "train_call", terminated_after_step_3)
    assert main(["pretrain", "--config", str(config)]) == 143
    err = capsys.readouterr().err.strip().splitlines()
    assert re.fullmatch(r"bert-keras pretrain: stopped by SIGTERM at step 3: checkpoint .*step-3 saved; rerun the same "
                        r"command to resume from it", err[-1]), err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is the run's only
    monkeypatch.setattr(P.Run, "train_call", original)
    assert main(["pretrain", "--config", str(config)]) == 0
    assert re.search(r"resuming from .*step-3 at step 3$", capsys.readouterr().out, re.M)
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]


def test_a_full_disk_is_the_disk_full_line_and_leaves_no_temporary(corpus, tmp_path, small_disk):  # noqa: F811
    disk = small_disk(0.6)  # room for the run's small files, not for a checkpoint (6.6 MB)
    run = disk / "run"
    os.makedirs(run / "checkpoints")
    os.makedirs(run / "checkpoints" / ".step-8.tmp-x2b0")  # what a killed save left behind
    os.makedirs(run / "checkpoints" / "ckpt-8_temp")  # ... and one of the earlier format
    with pytest.raises(DiskFullError, match=r"step-2: no space left on its device \(it needs about 6\.\d MB; 0\.\d MB free in "
                                            r".*checkpoints\); "
                                            r"no checkpoint was written yet in .*checkpoints$"):
        _train(corpus, run)
    assert sorted(os.listdir(run / "checkpoints")) == []  # neither step-2's temporary nor the stale ones
    subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)  # the user frees space
    assert _train(corpus, run)["step"] == 4


@pytest.mark.parametrize("lines, message", [
    ('{"step": 1}\n[1, 2]\n{"step": 3}\n', r"line 2: not a JSON object: '\[1, 2\]'"),
    ('{"step": 1}\n"text"\n{"step": 3}\n', r"line 2: not a JSON object: '\"text\"'"),
])
def test_a_metrics_line_that_is_json_but_not_an_object_is_an_error_naming_it(tmp_path, lines, message):
    from bert_keras.training.pretrain import read_metrics

    path = tmp_path / "metrics.jsonl"
    path.write_text(lines)
    with pytest.raises(BertKerasError, match=r"metrics\.jsonl: " + message):
        read_metrics(str(path))
    path.write_text('{"step": 1}\n7\n')  # a last line cut down to a number: torn, dropped
    assert read_metrics(str(path)) == ([{"step": 1}], True)


def test_a_run_on_a_remote_file_system_writes_every_file_there_and_final_reads_back(corpus, tmp_path,  # noqa: F811
                                                                                   monkeypatch):
    """A whole run with model_dir on ``ram://`` (TensorFlow's in-memory file system, as ``gs://``):
    checkpoints, metrics.jsonl and final/ land there, none as a local folder named after the URL."""
    monkeypatch.chdir(tmp_path)
    remote = "ram://tf_run"
    result = pretrain(PretrainConfig.from_dict(run_config(corpus, remote, phase1_steps=4, checkpoint_every=2)))
    assert result["step"] == 4
    assert sorted(n.rstrip("/") for n in tf.io.gfile.listdir(f"{remote}/checkpoints")) == ["step-2", "step-4"]
    with tf.io.gfile.GFile(f"{remote}/metrics.jsonl") as f:
        assert [json.loads(line)["step"] for line in f.read().splitlines()] == [2, 4]
    names = [n.rstrip("/") for n in tf.io.gfile.listdir(f"{remote}/final")]
    assert "bert_keras.json" in names and "model.safetensors" in names
    copied = tmp_path / "final_copied_down"
    copied.mkdir()
    for name in names:
        tf.io.gfile.copy(f"{remote}/final/{name}", str(copied / name))
    assert bk.load_checkpoint(copied, task="pretraining") is not None
    assert os.listdir(tmp_path) == ["final_copied_down"]  # nothing written under a local "ram:" folder


def test_checkpoints_on_a_remote_file_system_are_written_state_last_read_and_rotated():
    """A ``gs://`` model_dir goes through TensorFlow's file system; ``ram://`` is one in memory."""
    import keras

    from bert_keras.training import keras_checkpoints as K

    model = [keras.Variable(np.arange(6, dtype="float32").reshape(2, 3), name="w")]
    optimizer = [keras.Variable(np.int64(4), name="iteration"), keras.Variable(np.ones(3, "float32"), name="m")]
    folder = "ram://run/checkpoints"
    for step in (2, 4, 6):
        K.write_step(f"{folder}/step-{step}", step, 1, model, optimizer)
    tf.io.gfile.makedirs(f"{folder}/step-8")  # a save cut short: no state.json, not a checkpoint
    with tf.io.gfile.GFile(f"{folder}/step-8/model.npz", "wb") as f:
        f.write(b"partial")
    assert K.checkpoint_steps(folder) == [2, 4, 6]
    K.rotate(folder, keep=2)
    assert K.checkpoint_steps(folder) == [4, 6]
    model[0].assign(np.zeros((2, 3), "float32"))
    optimizer[0].assign(0)
    assert K.read_step(f"{folder}/step-6", model, optimizer) == (6, 1)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model[0]), np.arange(6).reshape(2, 3))
    assert int(keras.ops.convert_to_numpy(optimizer[0])) == 4
