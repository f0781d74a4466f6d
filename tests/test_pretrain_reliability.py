"""Pre-training refuses, before it trains, what would train backwards, on nothing, or on bytes."""

import os
import re

import pytest

import bert_keras as bk
from bert_keras.errors import BertKerasError
from bert_keras.training.pretrain import pretrain
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
