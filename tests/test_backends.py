"""The model-level suite on the Keras backend of this process (``KERAS_BACKEND``: tensorflow,
jax or torch): parity on real weights, `fit` in float32 and mixed_bfloat16, checkpoint round
trips, fine-tuning with a dev set, and the model path without TensorFlow.  CI runs this file
once per backend (`make test-backends`; leg 1 runs it on TensorFlow with the rest)."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import bert_keras as bk
from tests.conftest import random_batch, reference

torch = reference("torch")
transformers = reference("transformers")

BACKEND = keras.backend.backend()
TINY = bk.BertConfig.preset("tiny", vocab_size=200, max_position_embeddings=64)

# Differences from Hugging Face measured per backend (float32, CPU: tensorflow / jax / torch);
# each bound is about 10x the largest of the three:
#   MiniLM sequence_output 2.56e-6 / 2.68e-6 / 2.32e-6, pooled 2.16e-7 / 2.53e-7 / 2.09e-7;
#   rxnfp MLM logits 7.63e-6 / 7.63e-6 / 7.15e-6, NSP 5.72e-6 / 2.86e-6 / 6.68e-6;
#   rxnfp classifier logits 5.01e-6 / 4.77e-6 / 4.05e-6.


def test_the_backend_is_the_one_requested():
    assert BACKEND == os.environ.get("KERAS_BACKEND", "tensorflow")


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def _torch_inputs(x):
    return dict(input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
                token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
                attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long))


def test_real_minilm_equals_hugging_face(minilm_dir):
    x = random_batch(30522, batch=4, length=24, seed=3)
    x["token_ids"][:, 0] = 101
    enc = bk.load_checkpoint(minilm_dir)
    out = enc(x, training=False)
    with torch.no_grad():
        ref = transformers.BertModel.from_pretrained(minilm_dir).eval()(**_torch_inputs(x))
    real = x["padding_mask"][..., None]
    seq = float(np.abs((_numpy(out["sequence_output"]) - ref.last_hidden_state.numpy()) * real).max())
    pooled = float(np.abs(_numpy(out["pooled_output"]) - ref.pooler_output.numpy()).max())
    print(f"\n{BACKEND}: MiniLM vs Hugging Face: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq < 3e-5 and pooled < 3e-6


@pytest.fixture(scope="module")
def rxnfp_pretrained():
    from bert_keras import samples

    return str(samples.fetch("rxnfp_pretrained"))


def test_real_pretraining_heads_equal_hugging_face(rxnfp_pretrained):
    pre = bk.load_checkpoint(rxnfp_pretrained, task="pretraining")
    x = random_batch(591, batch=3, length=20, seed=5)
    x["token_ids"][:, 0] = 12
    positions = np.array([[1, 4, 7], [2, 3, 9], [5, 6, 0]], "int32")
    ours = pre({**x, "masked_positions": positions}, training=False)
    with torch.no_grad():
        ref = transformers.BertForPreTraining.from_pretrained(rxnfp_pretrained).eval()(**_torch_inputs(x))
    mlm = float(np.abs(_numpy(ours["mlm_logits"])
                       - np.take_along_axis(ref.prediction_logits.numpy(), positions[..., None], axis=1)).max())
    nsp = float(np.abs(_numpy(ours["nsp_logits"]) - ref.seq_relationship_logits.numpy()).max())
    print(f"\n{BACKEND}: rxnfp BertForPreTraining: MLM {mlm:.2e}, NSP {nsp:.2e}")
    assert mlm < 8e-5 and nsp < 7e-5


def test_real_classifier_equals_hugging_face():
    from bert_keras import samples

    folder = str(samples.fetch("rxnfp_classifier"))
    clf = bk.load_checkpoint(folder, task="classification")
    x = random_batch(591, batch=3, length=20, seed=6)
    with torch.no_grad():
        ref = transformers.BertForSequenceClassification.from_pretrained(folder).eval()(**_torch_inputs(x))
    diff = float(np.abs(_numpy(clf(x, training=False)) - ref.logits.numpy()).max())
    print(f"\n{BACKEND}: rxnfp BertForSequenceClassification: logits {diff:.2e}")
    assert diff < 5e-5


def test_inference_function_does_not_keep_its_model_alive():
    import gc
    import weakref

    from bert_keras.models import inference_function

    enc = bk.BertEncoder(TINY)
    x = random_batch(TINY.vocab_size, batch=2, length=12, seed=1)
    out = _numpy(inference_function(enc)(x)["pooled_output"])
    assert out.shape == (2, TINY.hidden_size)
    ref = weakref.ref(enc)
    del enc
    gc.collect()
    assert ref() is None  # its cached function went with it


def test_constant_weights_inference_is_tensorflows_and_refused_elsewhere():
    from bert_keras.models import inference_function

    enc = bk.BertEncoder(TINY)
    x = random_batch(TINY.vocab_size, batch=2, length=12, seed=1)
    if BACKEND != "tensorflow":
        with pytest.raises(ValueError, match="constant_weights=True.*TensorFlow backend.*" + BACKEND):
            inference_function(enc, constant_weights=True)
        return
    want, got = inference_function(enc)(x), inference_function(enc, constant_weights=True)(x)
    for name in ("sequence_output", "pooled_output"):  # measured 3e-8 / 0.0
        assert np.abs(_numpy(got[name]) - _numpy(want[name])).max() < 1e-6, name


def _pretraining_batch(seed=0, batch=8, length=32, predictions=5):
    rng = np.random.default_rng(seed)
    x = random_batch(TINY.vocab_size, batch=batch, length=length, seed=seed)
    x["masked_positions"] = np.sort(rng.choice(np.arange(1, 12), (batch, predictions)), -1).astype("int32")
    y = {"masked_ids": rng.integers(5, TINY.vocab_size, (batch, predictions)).astype("int32"),
         "masked_weights": np.ones((batch, predictions), "float32"),
         "next_sentence_label": rng.integers(0, 2, (batch,)).astype("int32")}
    return x, y


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_pretrainer_fit_lowers_the_loss(dtype):
    keras.utils.set_random_seed(0)
    model = bk.BertPretrainer(bk.BertEncoder(TINY, dtype=dtype))
    model.compile(optimizer=keras.optimizers.AdamW(2e-3))
    x, y = _pretraining_batch()
    history = model.fit(x, y, batch_size=8, epochs=12, verbose=0).history
    first, last = history["loss"][0], history["loss"][-1]
    print(f"\n{BACKEND} {dtype}: loss {first:.2f} -> {last:.2f}")
    # memorising one batch: measured 6.0-6.1 -> 1.9 on each backend, float32 and bf16 alike
    assert np.isfinite(history["loss"]).all() and last < 0.5 * first, history["loss"]
    assert {"mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss"} <= set(history)


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_classifier_fit_learns_a_token_rule(dtype):
    keras.utils.set_random_seed(0)
    clf = bk.BertClassifier(bk.BertEncoder(TINY, dtype=dtype), 2)
    rng = np.random.default_rng(1)
    x = random_batch(TINY.vocab_size, batch=64, length=16, seed=2)
    y = rng.integers(0, 2, 64).astype("int32")
    x["token_ids"][:, 1] = np.where(y == 1, 7, 8)  # the label is the second token
    clf.compile(optimizer=keras.optimizers.AdamW(1e-3),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    history = clf.fit(x, y, batch_size=16, epochs=8, verbose=0).history
    assert history["accuracy"][-1] >= 0.95, history
    logits = _numpy(clf.predict_on_batch(x))
    assert logits.dtype == np.float32 and (logits.argmax(-1) == y).mean() >= 0.95


@pytest.mark.parametrize("flavor", ["bert_keras", "huggingface"])
def test_checkpoint_round_trip_is_exact(tmp_path, flavor):
    keras.utils.set_random_seed(0)
    pre = bk.BertPretrainer(bk.BertEncoder(TINY))
    x, _ = _pretraining_batch(seed=4)
    want = pre(x, training=False)
    bk.save_checkpoint(pre, tmp_path / "ckpt", flavor=flavor)
    back = bk.load_checkpoint(tmp_path / "ckpt", task="pretraining")
    got = back(x, training=False)
    for name in ("mlm_logits", "nsp_logits"):
        np.testing.assert_array_equal(_numpy(got[name]), _numpy(want[name]))


def test_finetune_with_a_dev_set_keeps_the_best_epoch(tmp_path, minilm_dir):
    from bert_keras import finetuning, tasks

    keras.utils.set_random_seed(0)
    init = tmp_path / "init"
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522, max_position_embeddings=128))
    bk.save_checkpoint(enc, init, vocab_path=os.path.join(minilm_dir, "vocab.txt"), lower_case=True)
    rng = np.random.default_rng(0)
    words = {"pos": ["great", "wonderful", "superb"], "neg": ["awful", "boring", "dull"]}

    def rows(n):
        labels = rng.choice(["pos", "neg"], n)
        return [tasks.InputExample(text_a=f"the movie was {rng.choice(words[label])} really", label=label)
                for label in labels]

    result = finetuning.finetune("classification", rows(160), rows(32), str(init), tmp_path / "run", epochs=4,
                                 batch_size=8, learning_rate=2e-3, verbose=0)
    assert result["accuracy"] >= 90.0, result
    again = finetuning.evaluate(tmp_path / "run" / "best", rows(32))
    assert again["accuracy"] >= 90.0, again


NO_TENSORFLOW = r"""
import sys
sys.modules["tensorflow"] = None  # an import of TensorFlow now fails
sys.modules["tensorflow_text"] = None
import os, tempfile
import numpy as np, keras
import bert_keras as bk
from bert_keras.errors import BertKerasError
folder = sys.argv[1]
enc = bk.load_checkpoint(folder)
clf = bk.BertClassifier(enc, 2)
clf.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x = {"token_ids": np.full((4, 8), 1000, "int32"), "segment_ids": np.zeros((4, 8), "int32"),
     "padding_mask": np.ones((4, 8), "int32")}
clf.fit(x, np.array([0, 1, 0, 1]), epochs=1, verbose=0)
out = tempfile.mkdtemp()
bk.save_checkpoint(clf, os.path.join(out, "ours"))
bk.save_checkpoint(clf, os.path.join(out, "hf"), flavor="huggingface")
bk.load_checkpoint(os.path.join(out, "ours"), task="classification")
try:
    bk.save_checkpoint(clf, os.path.join(out, "google"), flavor="google")
except BertKerasError as e:
    print("google:", e)
print("backend:", keras.backend.backend(), "tensorflow imported:", sys.modules["tensorflow"] is not None)
"""


def test_the_model_path_runs_without_tensorflow(minilm_dir):
    backend = "jax" if BACKEND == "tensorflow" else BACKEND  # TensorFlow's own backend needs it
    env = {**os.environ, "KERAS_BACKEND": backend}
    proc = subprocess.run([sys.executable, "-c", NO_TENSORFLOW, minilm_dir], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert f"backend: {backend} tensorflow imported: False" in lines
    google = [line for line in lines if line.startswith("google:")]
    assert len(google) == 1 and "writing a Google TF1 checkpoint needs TensorFlow" in google[0]
    assert not os.path.exists(google[0].split(": ")[1])  # nothing written


def test_weights_trained_here_export_through_tensorflow_to_the_same_logits(tmp_path, minilm_dir):
    """`bert-keras export` runs on TensorFlow whatever KERAS_BACKEND says; the library's export
    functions, called off TensorFlow, say so in one line."""
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    clf = bk.BertClassifier(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522,
                                                                  max_position_embeddings=128)), 2)
    x = random_batch(30522, batch=4, length=12, seed=8)
    clf.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    clf.fit(x, np.array([0, 1, 1, 0]), epochs=2, verbose=0)
    want = _numpy(clf.predict_on_batch(x))
    folder, out = tmp_path / "run", tmp_path / "serving"
    bk.save_checkpoint(clf, folder, vocab_path=os.path.join(minilm_dir, "vocab.txt"), lower_case=True,
                       metadata={"task": "classification", "labels": ["neg", "pos"]})
    env = {**os.environ, "KERAS_BACKEND": BACKEND}
    proc = subprocess.run([sys.executable, "-m", "bert_keras", "export", "--model-dir", str(folder), "--out",
                           str(out)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    served = tf.saved_model.load(str(out)).signatures["serve_ids"]
    got = served(**{k: tf.constant(v) for k, v in x.items()})
    logits = [v.numpy() for k, v in got.items() if k == "logits"][0]
    np.testing.assert_allclose(logits, want, atol=2e-5, rtol=0)

    backend = "jax" if BACKEND == "tensorflow" else BACKEND
    code = ("import sys, bert_keras as bk\nfrom bert_keras.errors import BertKerasError\n"
            "try:\n    bk.export_saved_model(sys.argv[1], sys.argv[2])\n"
            "except BertKerasError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(folder), str(tmp_path / "again")], capture_output=True,
                          text=True, env={**os.environ, "KERAS_BACKEND": backend}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == (
        f"export_saved_model traces the model with TensorFlow, and Keras runs on {backend} in this process: save "
        "the model with bk.save_checkpoint and run `bert-keras export --model-dir DIR --out OUT` (it runs on "
        "TensorFlow whatever KERAS_BACKEND says), or call it with KERAS_BACKEND=tensorflow")


def test_cli_finetune_evaluate_and_predict_run_on_this_backend(tmp_path, minilm_dir):
    import csv
    import json

    keras.utils.set_random_seed(0)
    enc = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522, max_position_embeddings=128))
    bk.save_checkpoint(enc, tmp_path / "init", vocab_path=os.path.join(minilm_dir, "vocab.txt"), lower_case=True)
    rng = np.random.default_rng(0)
    for name, n in (("train", 48), ("dev", 16)):
        with open(tmp_path / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "label"])
            for label in rng.integers(0, 2, n):
                writer.writerow([f"the film was {'great' if label else 'awful'} indeed", "pos" if label else "neg"])
    env = {**os.environ, "KERAS_BACKEND": BACKEND}

    def cli(*args):
        proc = subprocess.run([sys.executable, "-m", "bert_keras", *map(str, args)], capture_output=True, text=True,
                              env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout

    cli("finetune", "--task", "classification", "--init", tmp_path / "init", "--train", tmp_path / "train.csv",
        "--eval", tmp_path / "dev.csv", "--model-dir", tmp_path / "run", "--epochs", 1, "--batch-size", 8)
    scores = json.loads(cli("evaluate", "--model-dir", tmp_path / "run" / "best", "--eval", tmp_path / "dev.csv"))
    assert 0.0 <= scores["accuracy"] <= 100.0
    lines = [json.loads(line) for line in cli("predict", "--model", tmp_path / "run" / "best", "a great film",
                                              "an awful film").splitlines()]
    assert [line["text"] for line in lines] == ["a great film", "an awful film"]
    assert all(line["label"] in ("neg", "pos") and abs(sum(line["probabilities"].values()) - 1) < 1e-5
               for line in lines)


def test_cli_pretrain_names_its_backend_in_its_first_line(tmp_path, minilm_dir):
    """`bert-keras pretrain` runs on the shell's backend: JAX (keras.distribution.DataParallel),
    PyTorch (one device) or TensorFlow (tf.distribute); its first line names the backend and
    devices (no silent switch), and the checkpoint it writes loads on this backend."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(f"the film number {d} was {w} and long ." for w in
                                            ("great", "awful", "quiet", "loud", "slow", "fast"))
                                  for d in range(6)) + "\n", encoding="utf-8")
    env = {**os.environ, "KERAS_BACKEND": BACKEND, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "bert_keras", "pretrain", "--preset", "tiny", "--vocab",
         os.path.join(minilm_dir, "vocab.txt"), "--train-files", str(corpus), "--model-dir", str(tmp_path / "run"),
         "--phase1-steps", "3", "--phase2-steps", "0", "--phase1-seq-len", "32", "--phase1-max-predictions", "5",
         "--batch-size", "4", "--strategy", "cpu", "--no-progress"],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = proc.stdout.splitlines()[0]
    expected = {"jax": "backend: jax, DataParallel, ", "torch": "backend: torch, one device, "}.get(
        BACKEND, "backend: tensorflow, ")
    assert first.startswith(expected) and "1 replica(s) on " in first, first
    pre = bk.load_checkpoint(tmp_path / "run" / "final", task="pretraining")
    x, _ = _pretraining_batch(seed=5)
    x["token_ids"] = np.minimum(x["token_ids"], 30521)
    out = pre(x, training=False)
    assert np.isfinite(_numpy(out["mlm_logits"])).all()


def test_pretrainer_fits_the_tf_data_pretraining_pipeline(tmp_path, minilm_dir):
    """The README's pre-training example on this backend: `pretraining_dataset` (tf.data, the
    in-graph tokenizer and masking) into `BertPretrainer.compile()` + `fit`."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(f"the film number {d} was {w} and long ." for w in
                                            ("great", "awful", "quiet", "loud", "slow", "fast"))
                                  for d in range(8)) + "\n", encoding="utf-8")
    keras.utils.set_random_seed(0)
    pre = bk.BertPretrainer(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522,
                                                                  max_position_embeddings=64)))
    dataset = bk.pretraining_dataset([str(corpus)], os.path.join(minilm_dir, "vocab.txt"), seq_len=32,
                                     max_predictions=5, batch_size=8, seed=0)
    pre.compile(optimizer=keras.optimizers.AdamW(2e-3))
    history = pre.fit(dataset, steps_per_epoch=10, epochs=3, verbose=0).history
    print(f"\n{BACKEND}: pre-training loss per epoch {[round(v, 2) for v in history['loss']]}")
    # measured 9.3 -> 3.4 (MLM + NSP) on each backend; the masks are drawn afresh every batch
    assert np.isfinite(history["loss"]).all() and history["loss"][-1] < 0.6 * history["loss"][0], history
    assert 0.0 <= history["mlm_accuracy"][-1] <= 1.0
