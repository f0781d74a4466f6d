"""Two-phase pre-training runner: distribution, accumulation, resume, phases, CLI.

Tiny BERTs on a slice of the real Wikipedia sample with a vocabulary built from
it.  Strategies that must be configured before TensorFlow starts (two logical
CPUs, two workers) and the kill -9 test run in subprocesses.
"""

import collections
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bert_keras import samples

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
RESERVED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """(text file, vocab file): 10 real Wikipedia articles (30 sentences each) and a
    WordPiece vocabulary of their characters, continuation characters and frequent words."""
    folder = tmp_path_factory.mktemp("pretrain_corpus")
    text = samples.fetch("wiki").read_text(encoding="utf-8")
    docs = [d.strip().split("\n")[:30] for d in text.split("\n\n") if d.strip()][:10]
    corpus_path = folder / "wiki_slice.txt"
    corpus_path.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    words = collections.Counter(w for d in docs for line in d for w in re.findall(r"\w+|[^\w\s]", line.lower()))
    chars = sorted({c for w in words for c in w})
    vocab = RESERVED + chars + ["##" + c for c in chars if c.isalnum()]
    vocab += [w for w, _ in words.most_common(300) if w not in vocab]
    vocab_path = folder / "vocab.txt"
    vocab_path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return str(corpus_path), str(vocab_path)


def run_config(corpus, model_dir, **overrides):
    values = dict(preset="tiny", model={"dropout": 0.0, "attention_dropout": 0.0}, vocab=corpus[1],
                  train_files=corpus[0], model_dir=str(model_dir), phase1_steps=4, phase2_steps=0,
                  phase1_seq_len=32, phase1_max_predictions=5, batch_size=8, learning_rate=1e-3,
                  warmup_steps=1, log_every=2, checkpoint_every=2, strategy="cpu", progress=False, seed=3)
    values.update(overrides)
    return values


# A script run in subprocesses: trains with a JSON config and saves every weight.
WORKER = textwrap.dedent("""
    import json, os, signal, sys
    import numpy as np
    config, out = json.loads(sys.argv[1]), sys.argv[2]
    kill_after = int(os.environ.get("KILL_AFTER_STEPS", "0"))
    if os.environ.get("LOGICAL_CPUS"):
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * int(os.environ["LOGICAL_CPUS"]))
    from bert_keras.training import pretrain as P
    from bert_keras.training.tensorflow_steps import TensorFlowSteps
    from bert_keras.models import tensorflow_step
    shapes = []
    original_step, original_train = tensorflow_step.micro_step, TensorFlowSteps.train
    def micro_step(model, features, *args):  # runs while tracing: records the static batch shapes
        shapes.append([features["token_ids"].shape.as_list(), features["masked_positions"].shape.as_list()])
        return original_step(model, features, *args)
    done = [0]
    def train(self, iterator, steps):
        totals = original_train(self, iterator, steps)
        done[0] += steps
        if kill_after and done[0] >= kill_after:
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no atexit: a real kill -9
        return totals
    tensorflow_step.micro_step, TensorFlowSteps.train = micro_step, train
    models = []
    from bert_keras.training import runner  # the runner builds the model
    original_build = runner.build_pretrainer
    runner.build_pretrainer = lambda *a, **k: models.append(original_build(*a, **k)) or models[-1]
    result = P.pretrain(P.PretrainConfig.from_dict(config))
    np.savez(out, **{v.path: np.asarray(v.numpy()) for v in models[0].weights})
    with open(out + ".json", "w") as f:
        json.dump({"shapes": shapes, "step": result["step"], "trained_steps": result["trained_steps"],
                   "replicas": result["replicas"]}, f)
""")


def run_worker(tmp_path, config, out, env=None, wait=True):
    script = tmp_path / "worker.py"
    if not script.exists():
        script.write_text(WORKER)
    proc = subprocess.Popen([sys.executable, str(script), json.dumps(config), str(out)],
                            env=dict(ENV, **(env or {})), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    if not wait:
        return proc
    output, _ = proc.communicate(timeout=240)
    return proc.returncode, output


def load(out):
    with np.load(str(out)) as f:
        weights = {k: f[k] for k in f.files}
    with open(str(out) + ".json") as f:
        return weights, json.load(f)


# --------------------------------------------------------------------------- resume
@pytest.fixture(scope="module")
def resume_runs(corpus, tmp_path_factory):
    """An uninterrupted run, the same run killed with SIGKILL after step 7 (last
    checkpoint: 6), and the killed run's rerun.
    Dropout is on (its random state must be restored too); phase 2 runs at 512."""
    tmp = tmp_path_factory.mktemp("resume")
    config = run_config(corpus, tmp / "straight", model={"dropout": 0.1, "attention_dropout": 0.1},
                        phase1_steps=10, phase2_steps=2, phase2_seq_len=512, phase2_max_predictions=80,
                        phase2_batch_size=2, log_every=1, checkpoint_every=3, eval_batches=1,
                        eval_files=corpus[0])
    # Held-out evaluation only in the uninterrupted run (it does not touch the weights).
    killed_config = dict(config, model_dir=str(tmp / "killed"), eval_batches=0)
    straight = run_worker(tmp, config, tmp / "straight.npz")
    killed = run_worker(tmp, killed_config, tmp / "killed.npz", env={"KILL_AFTER_STEPS": "7"})
    resumed = run_worker(tmp, killed_config, tmp / "resumed.npz")
    return dict(tmp=tmp, config=killed_config, straight=straight, killed=killed, resumed=resumed)


def test_kill_9_mid_training_then_rerun_resumes_and_ends_with_the_uninterrupted_weights(resume_runs):
    r = resume_runs
    assert r["straight"][0] == 0, r["straight"][1][-3000:]
    assert r["killed"][0] == -signal.SIGKILL, r["killed"][1][-3000:]
    assert r["resumed"][0] == 0, r["resumed"][1][-3000:]
    assert "at step 6" in r["resumed"][1]  # the last checkpoint before the kill
    straight, straight_info = load(r["tmp"] / "straight.npz")
    resumed, resumed_info = load(r["tmp"] / "resumed.npz")
    assert resumed_info["trained_steps"] == 12 - 6 and straight_info["trained_steps"] == 12
    assert straight.keys() == resumed.keys()
    for name in straight:
        # measured 0.0: the resumed run replays the remaining steps bit for bit
        np.testing.assert_allclose(resumed[name], straight[name], rtol=0, atol=1e-7, err_msg=name)
    # metrics.jsonl: the killed run's lines after step 6 were dropped, every step logged once.
    lines = [json.loads(x) for x in open(r["tmp"] / "killed" / "metrics.jsonl")]
    assert [x["step"] for x in lines] == list(range(1, 13))
    reference = [json.loads(x) for x in open(r["tmp"] / "straight" / "metrics.jsonl")]
    np.testing.assert_allclose([x["loss"] for x in lines], [x["loss"] for x in reference], rtol=1e-7)  # measured 0.0


def test_finished_run_exits_without_training_and_final_model_loads(resume_runs, capsys):
    import bert_keras as bk
    from bert_keras.training.pretrain import PretrainConfig, pretrain

    r = resume_runs
    assert r["resumed"][0] == 0, r["resumed"][1][-3000:]
    result = pretrain(PretrainConfig.from_dict(r["config"]))  # the same command a third time
    assert "already finished at step 12" in capsys.readouterr().out
    assert result["trained_steps"] == 0 and result["step"] == 12

    final = r["tmp"] / "killed" / "final"
    encoder = bk.load_checkpoint(str(final))
    assert isinstance(encoder, bk.BertEncoder)
    assert (final / "vocab.txt").read_text() == open(r["config"]["vocab"]).read()
    resumed, _ = load(r["tmp"] / "resumed.npz")
    np.testing.assert_array_equal(encoder.embeddings.token_embedding.embeddings.numpy(),
                                  resumed["embeddings/token_embedding/embeddings"])
    with_heads = bk.load_checkpoint(str(final), task="pretraining")
    np.testing.assert_array_equal(with_heads.nsp_head.kernel.numpy(), resumed["nsp_head/kernel"])


def test_phase_2_runs_at_512_with_80_predictions(resume_runs):
    r = resume_runs
    lines = [json.loads(x) for x in open(r["tmp"] / "straight" / "metrics.jsonl")]
    assert {(x["phase"], x["seq_len"], x["batch_size"]) for x in lines if x["step"] <= 10} == {(1, 32, 8)}
    assert {(x["phase"], x["seq_len"], x["batch_size"]) for x in lines if x["step"] > 10} == {(2, 512, 2)}
    for key in ("loss", "mlm_accuracy", "nsp_accuracy", "examples_per_second", "learning_rate"):
        assert all(np.isfinite(x[key]) for x in lines), key
    _, info = load(r["tmp"] / "straight.npz")
    assert [32, 5] in [[s[0][1], s[1][1]] for s in info["shapes"]]
    assert [[2, 512], [2, 80]] in info["shapes"]  # the traced phase-2 batch
    evals = json.load(open(r["tmp"] / "straight" / "eval.json"))
    assert evals["phase1"]["seq_len"] == 32 and evals["phase2"]["seq_len"] == 512
    assert evals["phase2"]["mlm_targets"] > 0
    for e in evals.values():  # the 80/10/10 split covers every target and averages to the total
        parts = [(e[f"mlm_accuracy_at_{k}"], e[f"mlm_targets_at_{k}"]) for k in ("mask", "kept", "random")]
        assert sum(n for _, n in parts) == e["mlm_targets"]
        assert sum(a * n for a, n in parts if n) / e["mlm_targets"] == pytest.approx(e["mlm_accuracy"], abs=1e-6)


def test_held_out_evaluation_tells_copying_from_using_the_context(corpus):
    """A "model" that predicts the token shown at each target (what a model on the unigram
    plateau learns for the kept 10%) scores 1.0 on kept targets and 0.0 at [MASK]s."""
    import tensorflow as tf

    from bert_keras.data.pretraining import pretraining_dataset
    from bert_keras.text.vocab import load_vocab
    from bert_keras.training.pretrain import evaluate_pretrainer

    vocab = load_vocab(corpus[1])
    mask_id = vocab.index("[MASK]")

    def copier(features, training=False):
        shown = tf.gather(features["token_ids"], features["masked_positions"], batch_dims=1)
        return {"mlm_logits": tf.one_hot(shown, len(vocab)) * 10.0,
                "nsp_logits": tf.zeros([tf.shape(shown)[0], 2])}

    # Materialised: masking is drawn afresh on every pass over the dataset.
    batches = list(pretraining_dataset([corpus[0]], corpus[1], seq_len=64, max_predictions=10,
                                       batch_size=8, seed=3).take(6))
    e = evaluate_pretrainer(copier, batches, batches=6, mask_id=mask_id)
    assert e["mlm_accuracy_at_kept"] == 1.0 and e["mlm_accuracy_at_mask"] == 0.0
    assert e["mlm_accuracy_at_random"] == 0.0
    n = e["mlm_targets"]
    assert e["mlm_targets_at_mask"] / n == pytest.approx(0.8, abs=0.06)  # the 80/10/10 rule
    assert e["mlm_accuracy"] == pytest.approx(e["mlm_targets_at_kept"] / n)
    # Entropy of the held-out targets' own distribution, recomputed from the same batches.
    ids = np.concatenate([lab["masked_ids"].numpy()[lab["masked_weights"].numpy() > 0]
                          for _, lab in batches])
    freq = np.unique(ids, return_counts=True)[1] / len(ids)
    assert e["unigram_entropy"] == pytest.approx(-np.sum(freq * np.log(freq)), rel=1e-9)


# --------------------------------------------------------------------------- distribution
def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_multi_worker_mirrored_two_processes_end_with_identical_weights(corpus, tmp_path):
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    config = run_config(corpus, tmp_path / "mw", strategy="multiworker", phase1_steps=3, checkpoint_every=3)
    procs = [run_worker(tmp_path, config, tmp_path / f"w{i}.npz", wait=False,
                        env={"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})})
             for i in range(2)]
    outputs = []
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outputs)
    (w0, i0), (w1, _) = load(tmp_path / "w0.npz"), load(tmp_path / "w1.npz")
    assert i0["replicas"] == 2
    for name in w0:
        np.testing.assert_array_equal(w0[name], w1[name], err_msg=name)
    # Trained (not the initial weights): the chief logged, checkpointed and exported.
    lines = [json.loads(x) for x in open(tmp_path / "mw" / "metrics.jsonl")]
    assert [x["step"] for x in lines] == [2, 3]
    assert os.path.exists(tmp_path / "mw" / "checkpoints" / "step-3" / "state.json")
    assert not os.path.exists(tmp_path / "mw" / "worker_tmp" / "worker_1")


MIRRORED = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    import bert_keras as bk
    from bert_keras.training.optimization import create_optimizer
    from bert_keras.training.tensorflow_steps import train_steps
    corpus, vocab, out = sys.argv[1:4]
    vocab_size = len(open(vocab).read().split())
    ds = bk.data.pretraining_dataset(corpus, vocab, seq_len=32, max_predictions=5, batch_size=8, seed=1)
    batches = [tf.nest.map_structure(lambda t: t.numpy(), b) for b in ds.take(3)]
    def train(strategy, per_replica, jit_compile=False):
        keras.utils.set_random_seed(0)
        with strategy.scope():
            model = bk.BertPretrainer(bk.BertEncoder(bk.BertConfig.preset(
                "tiny", vocab_size=vocab_size, dropout=0.0, attention_dropout=0.0)))
            opt = create_optimizer("adamw", 1e-3, total_steps=3, warmup_steps=1, clipnorm=1.0)
            opt.build(model.trainable_variables)
            model.compile(optimizer=opt)
        def dataset_fn(ctx):
            assert ctx.get_per_replica_batch_size(8) == per_replica
            # The global batch b, split into per-replica pieces in replica order.
            pieces = [tf.nest.map_structure(lambda t: t[i:i + per_replica], b)
                      for b in batches for i in range(0, 8, per_replica)]
            return tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(lambda *t: np.stack(t), *pieces))
        it = iter(strategy.distribute_datasets_from_function(dataset_fn))
        stats = train_steps(model, it, 3, jit_compile=jit_compile)
        return {v.path: v.numpy() for v in model.trainable_variables}, stats
    single, s_stats = train(tf.distribute.get_strategy(), 8)
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    two, m_stats = train(mirrored, 4)
    xla, x_stats = train(mirrored, 4, jit_compile=True)
    np.savez(out, **{"single/" + k: v for k, v in single.items()}, **{"two/" + k: v for k, v in two.items()},
             **{"xla/" + k: v for k, v in xla.items()},
             single_stats=s_stats, two_stats=m_stats, xla_stats=x_stats, replicas=mirrored.num_replicas_in_sync)
""")


def test_mirrored_over_two_logical_cpus_equals_one_device_for_the_same_global_batch_also_with_xla(corpus, tmp_path):
    script = tmp_path / "mirrored.py"
    script.write_text(MIRRORED)
    out = tmp_path / "mirrored.npz"
    proc = subprocess.run([sys.executable, str(script), corpus[0], corpus[1], str(out)], env=ENV,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(out) as f:
        assert int(f["replicas"]) == 2
        np.testing.assert_allclose(f["two_stats"], f["single_stats"], rtol=1e-6)  # measured 0.0
        names = [k[len("single/"):] for k in f.files if k.startswith("single/")]
        assert len(names) > 20
        for name in names:
            # measured 1.4e-8
            np.testing.assert_allclose(f["two/" + name], f["single/" + name], rtol=0, atol=1.5e-7, err_msg=name)
        # The same with each replica's forward/backward XLA-compiled (jit_compile).
        np.testing.assert_allclose(f["xla_stats"], f["single_stats"], rtol=1e-6)  # measured 1.0e-7
        for name in names:
            # measured 6.0e-8
            np.testing.assert_allclose(f["xla/" + name], f["single/" + name], rtol=0, atol=2e-7, err_msg=name)


# --------------------------------------------------------------------------- in process
@pytest.fixture(scope="module")
def real_batches(corpus):
    import tensorflow as tf

    import bert_keras as bk

    ds = bk.data.pretraining_dataset(corpus[0], corpus[1], seq_len=32, max_predictions=5, batch_size=8, seed=5)
    return [tf.nest.map_structure(lambda t: t.numpy(), b) for b in ds.take(2)]


class _TinyRun:
    """BertPretrainer-tiny compiled, trained as the runner trains it (`tensorflow_steps.train_steps`)."""

    def __init__(self, vocab_path, clipnorm=1.0):
        import keras

        import bert_keras as bk
        from bert_keras.training.optimization import create_optimizer

        keras.utils.set_random_seed(0)
        vocab_size = len(open(vocab_path).read().split())
        self.model = bk.BertPretrainer(bk.BertEncoder(bk.BertConfig.preset(
            "tiny", vocab_size=vocab_size, dropout=0.0, attention_dropout=0.0)))
        opt = create_optimizer("adamw", 1e-3, total_steps=2, warmup_steps=0, clipnorm=clipnorm)
        opt.build(self.model.trainable_variables)
        self.model.compile(optimizer=opt)

    def train(self, iterator, steps):
        from bert_keras.training.tensorflow_steps import train_steps

        return train_steps(self.model, iterator, steps)



def test_gradient_accumulation_of_k_micro_batches_equals_one_k_times_larger_batch(corpus, real_batches):
    import tensorflow as tf

    k = 4
    big = _TinyRun(corpus[1])
    start = [v.numpy() for v in big.model.trainable_variables]
    big_stats = big.train(iter(tf.data.Dataset.from_tensors(real_batches[0]).concatenate(
        tf.data.Dataset.from_tensors(real_batches[1]))), 2)
    small = _TinyRun(corpus[1])
    for v, s in zip(small.model.trainable_variables, start):
        v.assign(s)
    micro = [tf.nest.map_structure(lambda t: t[i:i + 2], b) for b in real_batches for i in range(0, 8, 2)]
    micro_ds = tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(lambda *t: np.stack(t), *micro))
    # the k micro-batches of each optimiser step stacked on a leading axis, as the runner feeds them
    small_stats = small.train(iter(micro_ds.batch(k, drop_remainder=True)), 2)
    np.testing.assert_allclose(small_stats, big_stats, rtol=1e-6)  # measured 0.0
    moved = 0
    for a, b, s in zip(small.model.trainable_variables, big.model.trainable_variables, start):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=6e-7, err_msg=a.path)  # measured 6.0e-8
        moved += not np.allclose(b.numpy(), s)
    assert moved > 20  # the steps really changed the weights
    # Step statistics: loss = MLM (mean over real targets) + NSP (mean over sequences).
    assert big_stats[6] == 16 and big_stats[4] == sum(b[1]["masked_weights"].sum() for b in real_batches)


def test_loss_is_googles_normalisation_and_matches_the_models_own_compute_loss(corpus, real_batches):
    run = _TinyRun(corpus[1])
    features, labels = real_batches[0]
    from bert_keras.training.pretrain import pretraining_terms

    outputs = run.model(features, training=False)
    t = {k: float(v) for k, v in pretraining_terms(labels, outputs).items()}
    ours = t["mlm_sum"] / (t["mlm_count"] + 1e-5) + t["nsp_sum"] / t["nsp_count"]
    theirs = float(run.model.compute_loss(features, labels, outputs, training=False))
    assert ours == pytest.approx(theirs, rel=1e-5)
    # Independent numpy cross-entropy for the MLM term.
    logits = np.asarray(outputs["mlm_logits"], np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(
        -1, keepdims=True)
    ce = -np.take_along_axis(logp, labels["masked_ids"][..., None], -1)[..., 0]
    assert t["mlm_sum"] == pytest.approx((ce * labels["masked_weights"]).sum(), rel=1e-4)


def test_non_finite_loss_stops_with_a_clear_message_and_keeps_the_last_good_checkpoint(corpus, tmp_path,
                                                                                       monkeypatch):
    from bert_keras.training import pretrain as P

    cfg = P.PretrainConfig.from_dict(run_config(corpus, tmp_path / "nan", phase1_steps=6, checkpoint_every=2))
    from bert_keras.training.tensorflow_steps import TensorFlowSteps

    original = TensorFlowSteps.train
    steps_run = [0]

    def train(self, iterator, steps):  # the loss turns NaN at step 3
        totals = original(self, iterator, steps)
        steps_run[0] += steps
        return totals * np.nan if steps_run[0] >= 3 else totals

    monkeypatch.setattr(TensorFlowSteps, "train", train)
    with pytest.raises(P.NonFiniteLossError,
                       match=r"loss is nan at step 3 \(phase 1\).*last good checkpoint \(step 2\)"):
        P.pretrain(cfg)
    assert sorted(os.listdir(tmp_path / "nan" / "checkpoints")) == ["step-2"]
    assert not os.path.exists(tmp_path / "nan" / "final")


def test_fp16_run_trains_with_float32_weights_and_dynamic_loss_scaling(corpus, tmp_path):
    precision = "fp16"  # bf16 takes the same path without the loss scale
    from bert_keras.training import pretrain as P

    models = []
    from bert_keras.training import runner  # the runner builds the model

    original = runner.build_pretrainer

    def build(*args, **kwargs):
        models.append(original(*args, **kwargs))
        return models[-1]

    runner.build_pretrainer = build
    try:
        result = P.pretrain(P.PretrainConfig.from_dict(run_config(
            corpus, tmp_path / precision, mixed_precision=precision, phase1_steps=2, log_every=1)))
    finally:
        runner.build_pretrainer = original
    model = models[0]
    assert model.encoder.transformer_layers[0].dtype_policy.name == "mixed_float16"
    assert all(v.dtype == "float32" for v in model.trainable_variables)
    assert result["step"] == 2 and np.isfinite(result["last_log"]["loss"])
    lines = [json.loads(x) for x in open(tmp_path / precision / "metrics.jsonl")]
    assert [x["step"] for x in lines] == [1, 2]
    state = json.loads((tmp_path / precision / "checkpoints" / "step-2" / "state.json").read_text())
    names = state["optimizer_variables"]
    assert any("dynamic_scale" in n or "loss_scale" in n for n in names), names[:20]


def test_keras_fit_path_trains_the_pretrainer_with_the_same_optimizer(corpus):
    import keras

    import bert_keras as bk
    from bert_keras.training.optimization import create_optimizer

    keras.utils.set_random_seed(0)
    vocab_size = len(open(corpus[1]).read().split())
    pre = bk.BertPretrainer(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=vocab_size)))
    pre.compile(optimizer=create_optimizer("adamw", 1e-3, total_steps=4, warmup_steps=1))
    ds = bk.data.pretraining_dataset(corpus[0], corpus[1], seq_len=32, max_predictions=5, batch_size=4, seed=0)
    history = pre.fit(ds, steps_per_epoch=2, epochs=2, verbose=0)
    assert int(pre.optimizer.iterations.numpy()) == 4
    assert all(np.isfinite(history.history["loss"]))
    assert 0.0 <= history.history["mlm_accuracy"][-1] <= 1.0


# --------------------------------------------------------------------------- config and CLI
def test_recipes_load_and_flags_override_them(tmp_path):
    from bert_keras.training.pretrain import PretrainConfig

    root = os.path.join(os.path.dirname(__file__), "..", "training")
    recipes = sorted(f for f in os.listdir(root) if f.endswith((".yaml", ".yml", ".json")))
    assert {"pretrain_mini_wiki.yaml", "pretrain_base_tpu.yaml"} <= set(recipes)
    for name in recipes:
        PretrainConfig.from_file(os.path.join(root, name))
    base = PretrainConfig.from_file(os.path.join(root, "pretrain_base_tpu.yaml"))
    assert (base.preset, base.batch_size, base.learning_rate, base.phase1_seq_len, base.phase2_seq_len,
            base.phase1_max_predictions, base.phase2_max_predictions) == ("base", 256, 1e-4, 128, 512, 20, 80)
    assert base.phase1_steps == 900_000 and base.phase2_steps == 100_000 and base.warmup_steps == 10_000
    cfg = PretrainConfig.from_file(os.path.join(root, "pretrain_mini_wiki.yaml"),
                                   {"phase1_steps": 7, "batch_size": None, "strategy": "cpu"})
    assert cfg.phase1_steps == 7 and cfg.strategy == "cpu" and cfg.batch_size == PretrainConfig.from_file(
        os.path.join(root, "pretrain_mini_wiki.yaml")).batch_size


def test_cli_bad_input_is_one_line_error(tmp_path, capsys):
    from bert_keras.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("phase1_steps: 10\nbatch_sise: 3\n")
    assert main(["pretrain", "--config", str(bad)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown option(s) batch_sise" in err[0] and str(bad) in err[0]
    assert main(["pretrain", "--config", str(tmp_path / "missing.yaml")]) == 1
    assert "config file not found" in capsys.readouterr().err
    assert main(["pretrain", "--preset", "tiny", "--batch-size", "6", "--gradient-accumulation-steps", "4",
                 "--vocab", "v", "--train-files", "t", "--model-dir", str(tmp_path)]) == 1
    assert "batch size 6 is not divisible by gradient_accumulation_steps 4" in capsys.readouterr().err
