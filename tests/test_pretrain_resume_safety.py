"""A resumed pre-training run: changed options are refused, a torn metrics.jsonl line is survived."""

import json
import os

import numpy as np
import pytest

from bert_keras.errors import BertKerasError
from tests.test_pretrain import corpus, run_config  # noqa: F401 - the fixture is used by name


def _pretrain(values):
    from bert_keras.training.pretrain import PretrainConfig, pretrain

    return pretrain(PretrainConfig.from_dict(values))


def test_resume_with_a_changed_option_is_refused_and_the_recorded_options_are_kept(corpus, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    _pretrain(run_config(corpus, run, phase1_steps=2))
    recorded = (run / "pretrain_config.json").read_text()
    changed = run_config(corpus, run, phase1_steps=2, learning_rate=2e-3, batch_size=4)
    with pytest.raises(BertKerasError) as info:
        _pretrain(changed)
    message = str(info.value)
    assert "\n" not in message and str(run / "pretrain_config.json") in message
    assert "changed: batch_size 8 -> 4, learning_rate 0.001 -> 0.002" in message
    assert (run / "pretrain_config.json").read_text() == recorded  # not overwritten
    # A safe change (how often it logs and saves) goes ahead and is recorded.
    again = _pretrain(run_config(corpus, run, phase1_steps=2, log_every=1, checkpoint_every=1))
    assert again["trained_steps"] == 0
    assert json.loads((run / "pretrain_config.json").read_text())["log_every"] == 1


def test_a_run_recorded_before_adam_rule_existed_resumes_only_with_the_keras_rule(corpus, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    _pretrain(run_config(corpus, run, phase1_steps=2))
    recorded = json.loads((run / "pretrain_config.json").read_text())
    for key in ("adam_rule", "init"):  # as an older version wrote it
        recorded.pop(key)
    recorded.update(preset="tiny", lower_case=True)
    (run / "pretrain_config.json").write_text(json.dumps(recorded))
    with pytest.raises(BertKerasError, match=r"changed: adam_rule None -> 'torch'"):
        _pretrain(run_config(corpus, run, phase1_steps=2))
    assert _pretrain(run_config(corpus, run, phase1_steps=2, adam_rule="keras"))["trained_steps"] == 0


def test_torn_last_metrics_line_is_dropped_on_resume(corpus, tmp_path, monkeypatch, capsys):  # noqa: F811
    from bert_keras.training.tensorflow_steps import TensorFlowSteps

    run = tmp_path / "run"
    values = run_config(corpus, run, phase1_steps=4, log_every=1, checkpoint_every=2)
    original = TensorFlowSteps.train
    done = [0]

    def stop_after_two(self, iterator, steps):
        if done[0] >= 2:
            raise KeyboardInterrupt  # the process dies after the step-2 checkpoint
        done[0] += steps
        return original(self, iterator, steps)

    monkeypatch.setattr(TensorFlowSteps, "train", stop_after_two)
    with pytest.raises(KeyboardInterrupt):
        _pretrain(values)
    monkeypatch.setattr(TensorFlowSteps, "train", original)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "phase": 1, "lo')  # killed in the middle of writing a line
    capsys.readouterr()
    result = _pretrain(values)
    assert result["step"] == 4 and result["trained_steps"] == 2
    assert "dropped a torn last line" in capsys.readouterr().out
    lines = [json.loads(x) for x in open(run / "metrics.jsonl")]
    assert [x["step"] for x in lines] == [1, 2, 3, 4]
    assert all(np.isfinite(x["loss"]) for x in lines)


def test_a_corrupt_metrics_line_before_the_last_is_an_error_naming_it(tmp_path):
    from bert_keras.training.pretrain import read_metrics

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(BertKerasError, match=r"metrics.jsonl: line 2: not a JSON object: 'not json'"):
        read_metrics(str(path))
    path.write_text('{"step": 1}\n{"step": 2')
    assert read_metrics(str(path)) == ([{"step": 1}], True)
    assert read_metrics(str(tmp_path / "none.jsonl")) == ([], False)


def test_final_folder_is_replaced_only_when_it_holds_nothing_else(corpus, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    os.makedirs(run / "final")
    (run / "final" / "notes.txt").write_text("mine")
    with pytest.raises(BertKerasError, match=r"final: folder exists, is not empty and is not a bert-keras checkpoint; refusing to replace it"):
        _pretrain(run_config(corpus, run, phase1_steps=2))
    assert (run / "final" / "notes.txt").read_text() == "mine"
