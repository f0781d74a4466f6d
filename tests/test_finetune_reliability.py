"""Fine-tuning reports no NaN as a score and trains no garbage silently."""

import json
import math
import os
import re

import numpy as np
import pytest

import bert_keras as bk
from bert_keras.errors import BertKerasError
from bert_keras.metrics.labels import pearson, regression_metrics, spearman

GOOD = ["a gorgeous, witty film", "warm and wise", "a triumph of style", "funny and moving"]
BAD = ["the jokes fall flat", "dull and long", "a tedious mess", "nothing works here"]


def _main(capsys, *args):
    from bert_keras.cli import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, minilm_dir):
    """A tiny encoder with the real uncased vocabulary, and small labelled files."""
    import keras

    root = tmp_path_factory.mktemp("finetune_reliability")
    keras.utils.set_random_seed(0)
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522, max_position_embeddings=64))
    bk.save_checkpoint(enc, root / "init", vocab_path=os.path.join(minilm_dir, "vocab.txt"))
    rows = [{"text": t, "label": "pos"} for t in GOOD] + [{"text": t, "label": "neg"} for t in BAD]
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows * 2), encoding="utf-8")
    scores = [{"text": t, "label": 0.5 + i} for i, t in enumerate(GOOD + BAD)]
    (root / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scores), encoding="utf-8")
    return root


def test_pearson_and_spearman_of_nan_are_nan_not_a_perfect_score():
    assert pearson([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert math.isnan(pearson([1.0, 2.0, 3.0], [float("nan")] * 3))  # was max(-1, min(1, nan)) = 1.0
    assert math.isnan(pearson([1.0, 2.0, 3.0], [1.0, float("nan"), 3.0]))
    assert math.isnan(spearman([1.0, 2.0, 3.0], [1.0, float("nan"), 3.0]))  # ranks would hide it
    scores = regression_metrics([1.0, 2.0, 3.0], [float("nan")] * 3)
    assert math.isnan(scores["pearson"]) and math.isnan(scores["spearman"]) and math.isnan(scores["mse"])


@pytest.mark.parametrize("flag, value, message", [
    ("--learning-rate", "nan", "learning_rate (--learning-rate) must be a finite number > 0, got nan"),
    ("--learning-rate", "inf", "learning_rate (--learning-rate) must be a finite number > 0, got inf"),
    ("--learning-rate", "-1e-5", "learning_rate (--learning-rate) must be a finite number > 0, got -1e-05"),
    ("--weight-decay", "nan", "weight_decay (--weight-decay) must be a finite number >= 0, got nan"),
    ("--batch-size", "0", "batch_size (--batch-size) must be an integer >= 1, got 0"),
    ("--epochs", "0", "epochs (--epochs) must be an integer >= 1, got 0"),
    ("--max-seq-len", "100000", "max_seq_len (--max-seq-len) must be an integer in 3..512"),
    ("--warmup-fraction", "1.5", "warmup_fraction (--warmup-fraction) must be a number in [0, 1], got 1.5"),
])
def test_hyper_parameters_are_refused_up_front_in_one_line(tiny, tmp_path, capsys, flag, value, message):
    out_dir = tmp_path / "run"
    code, _, err = _main(capsys, "finetune", "--task", "classification", "--init", tiny / "init",
                         "--train", tiny / "train.jsonl", "--model-dir", out_dir, f"{flag}={value}")
    assert code != 0 and message in err, err
    assert len([line for line in err.splitlines() if line.strip()]) == 1
    assert not out_dir.exists()  # refused before anything was written


def test_a_diverging_run_stops_at_the_first_non_finite_loss_and_saves_nothing(tiny, tmp_path, capsys):
    out_dir = tmp_path / "run"
    code, out, err = _main(capsys, "finetune", "--task", "classification", "--init", tiny / "init",
                           "--train", tiny / "train.jsonl", "--model-dir", out_dir, "--learning-rate", "1e30",
                           "--batch-size", "4", "--epochs", "3", "--max-seq-len", "16")
    assert code != 0
    assert "the training loss is" in err and "(not finite): training stopped and nothing was saved" in err, err
    assert not (out_dir / "best").exists()  # no NaN weights written


def test_a_nan_regression_label_or_a_duplicate_key_is_refused_naming_file_line_and_field(tiny, tmp_path):
    from bert_keras.tasks import read_examples

    nan_label = tmp_path / "nan.jsonl"
    nan_label.write_text('{"text": "fine", "label": 1.5}\n{"text": "odd", "label": "nan"}\n', encoding="utf-8")
    with pytest.raises(BertKerasError, match=r"nan\.jsonl:2: field 'label': not a finite number: 'nan'"):
        from bert_keras.tasks.classification import featurize_classification
        from bert_keras.text import BertTokenizer

        tok = BertTokenizer.from_vocab(str(tiny / "init" / "vocab.txt"), lower_case=True)
        featurize_classification(read_examples(nan_label), tok, 16, regression=True)
    literal = tmp_path / "literal.jsonl"
    literal.write_text('{"text": "odd", "label": NaN}\n', encoding="utf-8")
    with pytest.raises(BertKerasError, match=r"literal\.jsonl:1: NaN is not JSON"):
        list(read_examples(literal))
    twice = tmp_path / "twice.jsonl"
    twice.write_text('{"text": "fine", "label": "pos"}\n{"text": "a", "label": "pos", "label": "zzz"}\n',
                     encoding="utf-8")
    with pytest.raises(BertKerasError, match=r"twice\.jsonl:2: field 'label' appears twice"):
        list(read_examples(twice))


def test_finetune_into_a_log_writes_plain_progress_lines_without_terminal_codes(tiny, tmp_path, capsys):
    code, out, err = _main(capsys, "finetune", "--task", "classification", "--init", tiny / "init",
                           "--train", tiny / "train.jsonl", "--model-dir", tmp_path / "run", "--batch-size", "4",
                           "--epochs", "1", "--max-seq-len", "16")
    assert code == 0, err
    assert "\x1b" not in out and "\r" not in out
    # the plain line of Keras' bar (16 examples / 4), e.g. "epoch 1/1: 4/4 steps, accuracy 0.5625, loss 0.6922, ..."
    assert re.search(r"^epoch 1/1: 4/4 steps, .*loss \d\.\d{4}, [\d.]+ steps/s$", out, re.M), out
    assert (tmp_path / "run" / "best").is_dir()
