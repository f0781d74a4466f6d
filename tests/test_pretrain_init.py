"""Continued pre-training (`init`): real MLM/NSP heads checked against Hugging Face.

The reference is transformers' BertForPreTraining on the real rxnfp `bert_pretrained`
weights (the only real MLM + NSP heads available offline), and the same weights
rewritten as a Google TF1 checkpoint with tf.compat.v1 in Google's variable names.
"""

import json
import os
import re
import shutil

import numpy as np
import pytest
import torch
import transformers

import bert_keras as bk
from bert_keras import samples
from bert_keras.errors import BertKerasError

NO_DROPOUT = {"dropout": 0.0, "attention_dropout": 0.0}


@pytest.fixture(scope="module")
def rxnfp():
    return str(samples.fetch("rxnfp_pretrained"))


@pytest.fixture(scope="module")
def chem_corpus(tmp_path_factory, rxnfp):
    """Documents of whole-word tokens of the rxnfp vocabulary (atoms, bonds, digits)."""
    vocab = open(os.path.join(rxnfp, "vocab.txt"), encoding="utf-8").read().split("\n")
    words = [t for t in vocab if re.fullmatch(r"[A-Za-z0-9]+", t) and not t.startswith("unused")]
    rng = np.random.default_rng(0)
    docs = ["\n".join(" ".join(rng.choice(words, rng.integers(6, 20))) for _ in range(8)) for _ in range(24)]
    path = tmp_path_factory.mktemp("chem") / "chem.txt"
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return str(path)


def _google_name(hf_name):
    """Hugging Face BertForPreTraining name -> Google's TF1 name (transformers' load_tf_weights_in_bert, reversed).

    Returns (name, transpose) or None for names Google does not store."""
    if hf_name.endswith("position_ids") or hf_name.startswith("cls.predictions.decoder"):
        return None
    special = {"cls.predictions.bias": "cls/predictions/output_bias",
               "cls.seq_relationship.weight": "cls/seq_relationship/output_weights",
               "cls.seq_relationship.bias": "cls/seq_relationship/output_bias"}
    if hf_name in special:
        return special[hf_name], False
    parts = hf_name.replace("layer.", "layer_").split(".")
    last = parts[-1]
    if "LayerNorm" in parts:
        parts[-1] = {"weight": "gamma", "bias": "beta"}[last]
        return "/".join(parts), False
    if parts[-2].endswith("embeddings"):
        return "/".join(parts[:-1]), False
    parts[-1] = {"weight": "kernel", "bias": "bias"}[last]
    return "/".join(parts), last == "weight"


@pytest.fixture(scope="module")
def rxnfp_google(tmp_path_factory, rxnfp):
    """The rxnfp weights as a Google TF1 checkpoint, written by tf.compat.v1's Saver."""
    import tensorflow as tf

    folder = tmp_path_factory.mktemp("google") / "rxnfp_tf1"
    folder.mkdir()
    state = torch.load(os.path.join(rxnfp, "pytorch_model.bin"), map_location="cpu", weights_only=True)
    graph = tf.Graph()
    with graph.as_default():
        variables = []
        for name, tensor in state.items():
            target = _google_name(name)
            if target is None:
                continue
            value = tensor.numpy().astype(np.float32)
            variables.append(tf.compat.v1.Variable(value.T if target[1] else value, name=target[0]))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, str(folder / "bert_model.ckpt"), write_meta_graph=False)
    config = json.load(open(os.path.join(rxnfp, "config.json")))
    google_keys = ("attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "hidden_size",
                   "initializer_range", "intermediate_size", "max_position_embeddings", "num_attention_heads",
                   "num_hidden_layers", "type_vocab_size", "vocab_size")
    (folder / "bert_config.json").write_text(json.dumps({k: config[k] for k in google_keys}))
    shutil.copy(os.path.join(rxnfp, "vocab.txt"), folder / "vocab.txt")
    names = dict(tf.train.list_variables(str(folder / "bert_model.ckpt")))
    assert names["cls/seq_relationship/output_weights"] == [2, 256]
    assert names["bert/encoder/layer_11/attention/self/query/kernel"] == [256, 256]
    return str(folder)


def _pretrain_config(**values):
    from bert_keras.training.pretrain import PretrainConfig

    return PretrainConfig.from_dict(values)


def _run(init, corpus, model_dir, **overrides):
    from bert_keras.training.pretrain import pretrain

    values = dict(init=init, train_files=corpus, model_dir=str(model_dir), model=NO_DROPOUT, phase1_steps=1,
                  phase2_steps=0, phase1_seq_len=64, phase1_max_predictions=10, batch_size=4, log_every=1,
                  checkpoint_every=1, strategy="cpu", progress=False, seed=0, learning_rate=1e-4)
    values.update(overrides)
    return pretrain(_pretrain_config(**values))


_HF_LOSSES = {}


def _hf_losses(folder, batch):
    """MLM and NSP losses of transformers' BertForPreTraining on one of our batches."""
    features, labels = batch
    key = (folder, features["token_ids"].numpy().tobytes())
    if key in _HF_LOSSES:
        return _HF_LOSSES[key]
    hf = transformers.BertForPreTraining.from_pretrained(folder).eval()
    ids = features["token_ids"].numpy()
    mlm_labels = np.full(ids.shape, -100, np.int64)
    positions, targets = features["masked_positions"].numpy(), labels["masked_ids"].numpy()
    real = labels["masked_weights"].numpy() > 0
    for b in range(ids.shape[0]):
        mlm_labels[b, positions[b][real[b]]] = targets[b][real[b]]
    with torch.no_grad():
        out = hf(input_ids=torch.tensor(ids, dtype=torch.long),
                 token_type_ids=torch.tensor(features["segment_ids"].numpy(), dtype=torch.long),
                 attention_mask=torch.tensor(features["padding_mask"].numpy(), dtype=torch.long))
    vocab = out.prediction_logits.shape[-1]
    mlm = torch.nn.functional.cross_entropy(out.prediction_logits.reshape(-1, vocab),
                                            torch.tensor(mlm_labels).reshape(-1), ignore_index=-100)
    nsp = torch.nn.functional.cross_entropy(out.seq_relationship_logits,
                                            torch.tensor(labels["next_sentence_label"].numpy(), dtype=torch.long))
    _HF_LOSSES[key] = float(mlm), float(nsp)
    return _HF_LOSSES[key]


@pytest.mark.slow
@pytest.mark.parametrize("flavor", ["huggingface", "google"])
def test_first_batch_losses_equal_hugging_face_bert_for_pretraining_on_real_heads(
        flavor, rxnfp, rxnfp_google, chem_corpus, tmp_path, capsys):
    init = rxnfp if flavor == "huggingface" else rxnfp_google
    _run(init, chem_corpus, tmp_path / "run")
    out = capsys.readouterr().out
    assert "encoder, MLM head, NSP head loaded" in out and "fresh" not in out
    assert "casing: cased, because the vocabulary has" in out  # SMILES: c (aromatic) is not C
    first = json.loads(open(tmp_path / "run" / "metrics.jsonl").readline())
    assert first["step"] == 1
    # The runner's first batch: phase 1's stream, seed 0 * 1000 + 1.
    batch = next(iter(bk.data.pretraining_dataset(chem_corpus, os.path.join(rxnfp, "vocab.txt"), seq_len=64,
                                                  max_predictions=10, batch_size=4, lower_case=False, seed=1)))
    mlm, nsp = _hf_losses(rxnfp, batch)
    print(f"\n{flavor}: MLM ours {first['mlm_loss']:.7f} HF {mlm:.7f}; NSP ours {first['nsp_loss']:.7f} HF {nsp:.7f}")
    # measured: MLM 4.3e-7, NSP < 1e-7 relative (both flavors)
    assert abs(first["mlm_loss"] - mlm) / mlm < 1e-5
    assert abs(first["nsp_loss"] - nsp) / nsp < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("flavor", ["huggingface", "google"])
def test_zero_steps_writes_a_final_model_equal_to_the_checkpoint(flavor, rxnfp, rxnfp_google, chem_corpus,
                                                                 tmp_path):
    from bert_keras.checkpoints import model_variables

    init = rxnfp if flavor == "huggingface" else rxnfp_google
    result = _run(init, None, tmp_path / "zero", phase1_steps=0, model={})
    assert result["trained_steps"] == 0
    final = bk.load_checkpoint(result["final_model"], task="pretraining")
    original = bk.load_checkpoint(rxnfp, task="pretraining")
    ours, theirs = model_variables(final), model_variables(original)
    assert len(ours) == 5 + 12 * 12 + 2 + 7  # embeddings, 12 blocks, pooler, heads
    for name, var in ours.items():
        np.testing.assert_array_equal(var.numpy(), theirs[name].numpy(), err_msg=name)
    assert open(os.path.join(result["final_model"], "vocab.txt")).read() == open(
        os.path.join(rxnfp, "vocab.txt")).read()


@pytest.mark.slow
def test_masked_lm_checkpoint_keeps_its_mlm_head_and_says_the_nsp_head_starts_fresh(rxnfp, chem_corpus,
                                                                                    tmp_path, capsys):
    mlm_only = tmp_path / "rxnfp_mlm"
    transformers.BertForMaskedLM.from_pretrained(rxnfp).save_pretrained(mlm_only)
    shutil.copy(os.path.join(rxnfp, "vocab.txt"), mlm_only / "vocab.txt")
    _run(str(mlm_only), chem_corpus, tmp_path / "run")
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("init:")]
    assert lines == [f"init: encoder, MLM head loaded from {mlm_only} (Hugging Face); "
                     "pooler and NSP head not in the checkpoint: they start fresh"]
    first = json.loads(open(tmp_path / "run" / "metrics.jsonl").readline())
    batch = next(iter(bk.data.pretraining_dataset(chem_corpus, os.path.join(rxnfp, "vocab.txt"), seq_len=64,
                                                  max_predictions=10, batch_size=4, lower_case=False, seed=1)))
    mlm, _ = _hf_losses(rxnfp, batch)
    assert abs(first["mlm_loss"] - mlm) / mlm < 1e-5  # the MLM head is the real one
    assert abs(first["nsp_loss"] - np.log(2)) < 0.05  # a fresh NSP head: about log 2


def test_conflicting_preset_or_vocab_is_a_one_line_error_naming_both(rxnfp, chem_corpus, tmp_path):
    with pytest.raises(BertKerasError, match=r"^preset 'tiny' \(2 layers, hidden 128.*\) conflicts with init "
                                             r".*\(12 layers, hidden 256, 4 heads, FFN 512\)"):
        _run(rxnfp, chem_corpus, tmp_path / "a", preset="tiny")
    other = tmp_path / "vocab.txt"
    other.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nc\n")
    with pytest.raises(BertKerasError, match=r"vocab '.*vocab.txt' \(6 tokens\) conflicts with init .*"
                                             r"vocab.txt \(591 tokens\)"):
        _run(rxnfp, chem_corpus, tmp_path / "b", vocab=str(other))
    with pytest.raises(BertKerasError, match=r"model.num_layers 4 conflicts with init .* \(num_layers 12\)"):
        _run(rxnfp, chem_corpus, tmp_path / "c", model={"num_layers": 4})
    # The checkpoint's own size and vocabulary are accepted.
    assert _run(rxnfp, chem_corpus, tmp_path / "d", phase1_steps=0, vocab=os.path.join(rxnfp, "vocab.txt"),
                bert_config=os.path.join(rxnfp, "config.json"))["step"] == 0


def test_existing_run_resumes_and_takes_precedence_over_init(rxnfp, chem_corpus, tmp_path, capsys):
    run = tmp_path / "run"
    first = _run(rxnfp, chem_corpus, run)
    weights = open(run / "final" / "model.safetensors", "rb").read()
    capsys.readouterr()
    again = _run(str(tmp_path / "elsewhere"), chem_corpus, run)  # init is not even opened
    out = capsys.readouterr().out
    assert again["trained_steps"] == 0 and first["step"] == again["step"] == 1
    assert re.search(r"holds a run \(checkpoint step-1\): resuming it; init .*elsewhere is not loaded", out)
    assert open(run / "final" / "model.safetensors", "rb").read() == weights


def _cli(args):
    from bert_keras.cli import main

    return main(["pretrain", *args, "--phase1-steps", "2", "--phase2-steps", "1", "--phase1-seq-len", "32",
                 "--phase1-max-predictions", "5", "--phase2-seq-len", "64", "--phase2-max-predictions", "8",
                 "--batch-size", "2", "--log-every", "1", "--strategy", "cpu", "--no-progress"])


def _wiki_text(folder, lines=120):
    text = samples.fetch("wiki").read_text(encoding="utf-8").split("\n")[:lines]
    path = folder / "wiki_head.txt"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.slow
def test_cli_init_from_a_bare_hugging_face_bert_model_runs_both_phases_and_fine_tuning_loads_it(tmp_path, capsys):
    from bert_keras import finetuning
    from bert_keras.tasks import InputExample

    assert _cli(["--init", "sample:minilm", "--train-files", _wiki_text(tmp_path),
                 "--model-dir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "casing: uncased, because the vocabulary has no upper-case tokens" in out
    assert "pooler loaded" not in out and re.search(
        r"init: encoder loaded from .*minilm \(Hugging Face\); MLM head and NSP head not in the checkpoint: "
        r"they start fresh", out)
    assert [json.loads(x)["seq_len"] for x in open(tmp_path / "run" / "metrics.jsonl")] == [32, 32, 64]
    final = tmp_path / "run" / "final"
    texts = ["a fine film", "a dull film", "great acting", "poor plot"] * 2
    examples = [InputExample(t, label=str(i % 2)) for i, t in enumerate(texts)]
    finetuning.finetune("classification", examples, None, init=str(final), model_dir=str(tmp_path / "ft"),
                        epochs=1, batch_size=4, max_seq_len=16, verbose=0)
    assert bk.load_checkpoint(str(tmp_path / "ft" / "best"), task="classification").num_classes == 2
    minilm = bk.load_checkpoint(str(samples.fetch("minilm")))
    trained = bk.load_checkpoint(str(final))
    assert trained.config.num_layers == 6 and trained.config.hidden_size == 384
    moved = np.abs(trained.token_embedding.embeddings.numpy() - minilm.token_embedding.embeddings.numpy()).max()
    assert moved > 0  # three optimiser steps changed the loaded weights


@pytest.mark.slow
def test_cli_init_from_a_google_tf1_folder_runs_both_phases_and_keeps_its_heads(rxnfp_google, chem_corpus, tmp_path,
                                                                                capsys):
    assert _cli(["--init", rxnfp_google, "--train-files", chem_corpus, "--model-dir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "init: encoder, MLM head, NSP head loaded from" in out and "(Google TF1)" in out
    summary = json.loads(out[out.rindex("{\n"):])
    assert summary["step"] == 3 and summary["trained_steps"] == 3
    clf = bk.load_checkpoint(summary["final_model"], task="classification", num_classes=2)
    assert clf.encoder.config.num_layers == 12 and clf.encoder.config.vocab_size == 591
