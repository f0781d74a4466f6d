"""Fine-tuning end to end for every task family (tiny model, real vocab, official file formats)."""

import csv
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import bert_keras as bk
from bert_keras import finetuning, tasks
from tests.conftest import reference

DATA = os.path.join(os.path.dirname(__file__), "data", "tasks")


@pytest.fixture(scope="module")
def tiny_init(tmp_path_factory, minilm_dir):
    """A tiny random BERT with the real uncased vocabulary, saved as a bert-keras folder."""
    keras.utils.set_random_seed(0)
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522, max_position_embeddings=128))
    folder = tmp_path_factory.mktemp("tiny_init")
    bk.save_checkpoint(enc, folder, vocab_path=os.path.join(minilm_dir, "vocab.txt"), lower_case=True)
    return str(folder)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "bert_keras", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def _write_csv(path, rows, header=("text", "label")):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def _sentiment_rows(n, seed):
    rng = np.random.default_rng(seed)
    good = ["great", "wonderful", "superb", "delightful", "excellent"]
    bad = ["awful", "boring", "terrible", "dreadful", "dull"]
    rows = []
    for i in range(n):
        label = int(rng.integers(0, 2))
        word = rng.choice(good if label else bad)
        filler = " ".join(rng.choice(["the", "movie", "was", "really", "quite", "film", "story"], rng.integers(2, 9)))
        rows.append((f"{filler} {word} {filler}", "pos" if label else "neg"))
    return rows


def test_classification_learns_a_separable_task_and_evaluate_agrees(tmp_path, tiny_init):
    _write_csv(tmp_path / "train.csv", _sentiment_rows(160, 0))
    _write_csv(tmp_path / "dev.csv", _sentiment_rows(40, 1))
    train = tasks.read_examples(tmp_path / "train.csv")
    dev = tasks.read_examples(tmp_path / "dev.csv")
    result = finetuning.finetune("classification", train, dev, tiny_init, tmp_path / "run", epochs=6,
                                 batch_size=8, learning_rate=2e-3, verbose=0)
    assert result["accuracy"] >= 90.0, result
    on_disk = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert on_disk["accuracy"] == result["accuracy"] and on_disk["epoch"] == result["epoch"]
    assert len(json.loads((tmp_path / "run" / "history.json").read_text())) == 6
    # The best checkpoint reloads with its labels and gives the same score.
    again = finetuning.evaluate(tmp_path / "run" / "best", dev)
    assert again["accuracy"] == pytest.approx(result["accuracy"])
    meta = bk.checkpoints.open_checkpoint(tmp_path / "run" / "best").meta
    assert meta["metadata"]["labels"] == ["neg", "pos"] and meta["task"] == "classification"


def test_batches_are_padded_to_their_longest_member_rounded_up_to_eight(tiny_init):
    tok = finetuning.checkpoint_tokenizer(tiny_init)
    rows = _sentiment_rows(200, 2)
    examples = [tasks.InputExample(text_a=t, label=l) for t, l in rows]
    feats = tasks.featurize_classification(examples, tok, 128, tasks.LabelMap(["neg", "pos"]))
    ratios = {}
    for multiple in (1, finetuning.LENGTH_MULTIPLE):
        ds = finetuning.training_dataset(feats.inputs, feats.labels, batch_size=16, length_multiple=multiple)
        real = padded = 0
        for x, _ in ds:
            real += int(np.asarray(x["padding_mask"]).sum())
            padded += int(np.prod(x["padding_mask"].shape))
            longest = int(np.asarray(x["padding_mask"]).sum(1).max())
            assert x["token_ids"].shape[1] == min(128, -(-longest // multiple) * multiple)
        assert ds.cardinality().numpy() == 13
        ratios[multiple] = padded / real
    # a few compiled shapes instead of one per length, for little padding (128 would be ~8x)
    assert ratios[1] < 1.1 and ratios[finetuning.LENGTH_MULTIPLE] < 2.0, ratios


def test_in_memory_batches_run_without_tf_data_autotuning(tiny_init):
    # With autotuning on, the end of a fit epoch waited 2.8-4.5 s for the tf.data optimiser's
    # pass to finish in 4 of 12 fine-tuning runs on a 2-core CPU (0 of 14 with it off).
    tok = finetuning.checkpoint_tokenizer(tiny_init)
    examples = [tasks.InputExample(text_a=t, label=l) for t, l in _sentiment_rows(40, 2)]
    feats = tasks.featurize_classification(examples, tok, 32, tasks.LabelMap(["neg", "pos"]))
    for ds in (finetuning.training_dataset(feats.inputs, feats.labels, batch_size=8),
               tasks.to_dataset(feats.inputs, feats.labels, batch_size=8)):
        assert ds.options().autotune.enabled is False
        assert sum(int(x["token_ids"].shape[0]) for x, _ in ds) == 40


def test_regression_reports_pearson_and_spearman(tmp_path, tiny_init):
    rng = np.random.default_rng(0)
    rows = [(f"{'very ' * k}good", str(k / 2)) for k in rng.integers(0, 6, 60)]
    _write_csv(tmp_path / "r.csv", rows)
    ex = tasks.read_examples(tmp_path / "r.csv")
    result = finetuning.finetune("regression", ex, ex, tiny_init, tmp_path / "reg", epochs=3, batch_size=16,
                                 learning_rate=1e-3, verbose=0)
    assert {"pearson", "spearman", "mse"} <= set(result)
    assert result["pearson"] > 50


def test_ner_cli_end_to_end_with_seqeval_equal_scores(tmp_path, tiny_init):
    conll = os.path.join(DATA, "conll2003", "sample.txt")
    proc = _cli("finetune", "--task", "ner", "--init", tiny_init, "--train", conll, "--eval", conll,
                "--model-dir", tmp_path / "ner", "--epochs", "2", "--batch-size", "4", "--learning-rate", "1e-3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((tmp_path / "ner" / "eval_results.json").read_text())
    assert {"precision", "recall", "f1", "accuracy"} <= set(result)
    # Recompute the entity F1 of the saved model with seqeval itself.
    seqeval = reference("seqeval.metrics")
    sentences = tasks.read_conll(conll)
    model = bk.load_checkpoint(tmp_path / "ner" / "best", task="token_classification")
    labels = tasks.LabelMap(bk.checkpoints.open_checkpoint(tmp_path / "ner" / "best").meta["metadata"]["labels"])
    feats = tasks.featurize_token_classification(sentences, finetuning.checkpoint_tokenizer(tmp_path / "ner" / "best"),
                                                 labels, 128)
    pred = np.argmax(finetuning.predict(model, feats.inputs), -1)
    words = tasks.words_from_predictions(pred, feats, labels)
    assert 100 * seqeval.f1_score([s.tags for s in sentences], words) == pytest.approx(result["f1"], abs=1e-6)
    proc = _cli("evaluate", "--model-dir", tmp_path / "ner" / "best", "--eval", conll)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["f1"] == pytest.approx(result["f1"])


def test_squad_v1_on_the_real_fixture(tmp_path, tiny_init):
    from bert_keras import samples

    squad = str(samples.fetch("squad_tiny"))
    proc = _cli("finetune", "--task", "squad", "--init", tiny_init, "--train", squad, "--eval", squad,
                "--first-answer-only", "--model-dir", tmp_path / "sq", "--epochs", "1", "--batch-size", "4",
                "--max-seq-len", "128", "--doc-stride", "64")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((tmp_path / "sq" / "eval_results.json").read_text())
    assert {"exact_match", "f1"} <= set(result) and 0 <= result["f1"] <= 100


def test_squad_v2_picks_the_null_threshold_on_the_eval_set(tmp_path, tiny_init):
    data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
        "context": "The Eiffel Tower is in Paris. It was finished in 1889 for the World's Fair.",
        "qas": [
            {"id": "a", "question": "Where is the Eiffel Tower?", "is_impossible": False,
             "answers": [{"text": "Paris", "answer_start": 23}]},
            {"id": "b", "question": "When was it finished?", "is_impossible": False,
             "answers": [{"text": "1889", "answer_start": 49}]},
            {"id": "c", "question": "Who painted the tower blue?", "is_impossible": True, "answers": []},
        ]}]}]}
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(data))
    examples = tasks.read_squad(data, is_training=True, version="2.0")
    dev = tasks.read_squad(data, version="2.0")
    result = finetuning.finetune("squad2", examples, dev, tiny_init, tmp_path / "sq2", epochs=1, batch_size=2,
                                 max_seq_len=64, dev_dataset=data, verbose=0)
    for key in ("exact", "f1", "HasAns_f1", "NoAns_f1", "null_threshold"):
        assert key in result
    assert result["total"] == 3 and result["HasAns_total"] == 2 and result["NoAns_total"] == 1
    # The reported F1 is the F1 of the answers at the threshold the official sweep picked: the
    # per-class F1s recombine into it ...
    assert result["f1"] == pytest.approx((2 * result["HasAns_f1"] + result["NoAns_f1"]) / 3, abs=1e-9)
    # ... and re-scoring the saved model's predictions at that threshold with the official script gives it again.
    model = bk.load_checkpoint(tmp_path / "sq2" / "best", task="span")
    tok = finetuning.checkpoint_tokenizer(tmp_path / "sq2" / "best")
    feats = tasks.featurize_squad(dev, tok, 64, 128, 64)
    out = finetuning.predict(model, feats.inputs)
    preds = tasks.postprocess_squad(dev, feats, out["start_logits"], out["end_logits"], version_2=True,
                                    tokenizer=tok)
    rescored = bk.metrics.squad_evaluate(data, tasks.apply_null_threshold(preds, result["null_threshold"]), "2.0")
    assert rescored["f1"] == pytest.approx(result["f1"], abs=1e-9)


def test_multiple_choice_on_swag_format(tmp_path, tiny_init):
    swag = os.path.join(DATA, "swag", "train.csv")
    train = tasks.read_swag(swag)
    result = finetuning.finetune("multiple-choice", train, train, tiny_init, tmp_path / "mc", epochs=1,
                                 batch_size=2, max_seq_len=64, verbose=0)
    assert 0 <= result["accuracy"] <= 100
    model = bk.load_checkpoint(tmp_path / "mc" / "best", task="multiple_choice")
    assert isinstance(model, bk.BertMultipleChoice)


def test_bad_input_is_a_one_line_error(tmp_path, tiny_init):
    _write_csv(tmp_path / "train.csv", [("fine", "pos"), ("bad", "neg")])
    _write_csv(tmp_path / "dev.csv", [("fine", "pos"), ("meh", "neutral")])
    proc = _cli("finetune", "--task", "classification", "--init", tiny_init, "--train", tmp_path / "train.csv",
                "--eval", tmp_path / "dev.csv", "--model-dir", tmp_path / "x", "--epochs", "1")
    assert proc.returncode == 1
    assert "'neutral' is not in the label set" in proc.stderr and "Traceback" not in proc.stderr
    proc = _cli("finetune", "--task", "classification", "--init", tiny_init, "--train", tmp_path / "missing.csv",
                "--model-dir", tmp_path / "x")
    assert proc.returncode == 1 and "missing.csv" in proc.stderr and "Traceback" not in proc.stderr
