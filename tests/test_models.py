import math

import keras
import numpy as np
import pytest

import bert_keras as bk
from bert_keras import layers as bl
from tests.conftest import random_batch

TINY = bk.BertConfig.preset("tiny", vocab_size=200, max_position_embeddings=64)


@pytest.fixture
def encoder():
    keras.utils.set_random_seed(0)
    return bk.BertEncoder(TINY)


def test_parameter_counts_equal_hugging_face():
    # transformers: BertModel(base) 109,482,240; large 335,141,888; BertForPreTraining(base) 110,106,428.
    assert bk.BertEncoder(bk.BertConfig.preset("base")).count_params() == 109_482_240
    assert bk.BertPretrainer(bk.BertEncoder(bk.BertConfig.preset("base"))).count_params() == 110_106_428
    assert bk.BertEncoder(bk.BertConfig.preset("large")).count_params() == 335_141_888


def test_every_model_has_the_documented_shapes(encoder):
    x = random_batch(200, batch=2, length=12)
    out = encoder(x)
    assert out["sequence_output"].shape == (2, 12, 128) and out["pooled_output"].shape == (2, 128)
    pre = bk.BertPretrainer(encoder)
    o = pre({**x, "masked_positions": np.array([[1, 2, 3], [4, 0, 0]], "int32")})
    assert o["mlm_logits"].shape == (2, 3, 200) and o["nsp_logits"].shape == (2, 2)
    assert bk.BertClassifier(encoder, num_classes=3)(x).shape == (2, 3)
    assert bk.BertClassifier(encoder, num_classes=1)(x).shape == (2, 1)
    assert bk.BertTokenClassifier(encoder, num_classes=9)(x).shape == (2, 12, 9)
    span = bk.BertSpanLabeler(encoder)(x)
    assert span["start_logits"].shape == (2, 12) and span["end_logits"].shape == (2, 12)
    choices = {k: np.stack([v, v[::-1], v], axis=1) for k, v in x.items()}  # [B, K=3, L]
    logits = bk.BertMultipleChoice(encoder)(choices)
    assert logits.shape == (2, 3)


def test_multiple_choice_scores_each_pair_independently(encoder):
    x = random_batch(200, batch=2, length=10)
    mc = bk.BertMultipleChoice(encoder)
    choices = {k: np.stack([v, v[::-1]], axis=1) for k, v in x.items()}
    logits = mc(choices).numpy()
    pooled = encoder({k: v[:, 1] for k, v in choices.items()})["pooled_output"]
    manual = mc.classifier(pooled).numpy()[:, 0]
    np.testing.assert_allclose(logits[:, 1], manual, atol=4e-8)  # measured 3.7e-9


def test_padding_does_not_change_real_positions(encoder):
    x = random_batch(200, batch=1, length=8, pair=False)
    x["padding_mask"][:] = 1
    padded = {k: np.concatenate([v, np.zeros((1, 5), "int32")], axis=1) for k, v in x.items()}
    a = encoder(x)["sequence_output"].numpy()
    b = encoder(padded)["sequence_output"].numpy()[:, :8]
    # measured 0.0: masked keys get exactly zero attention weight; 1e-6 allows kernel reordering
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_gelu_is_the_exact_erf_form():
    x = np.linspace(-5, 5, 101).astype("float32")
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    np.testing.assert_allclose(bl.gelu(x), exact, atol=6e-7)  # measured 6.0e-8 (float32 erf)
    assert np.abs(np.asarray(bl.gelu_approximate(x)) - exact).max() > 1e-4


def test_mlm_projection_is_tied_to_token_embeddings(encoder):
    pre = bk.BertPretrainer(encoder)
    x = {**random_batch(200, batch=1, length=6), "masked_positions": np.array([[1, 2]], "int32")}
    before = pre(x)["mlm_logits"].numpy()
    table = encoder.token_embedding.embeddings
    # The projection weight is the embedding variable itself, not a copy.
    assert not any(w is not table and tuple(w.shape) == (200, 128) for w in pre.weights)
    delta = np.zeros(table.shape, "float32")
    # token 7 is not in the batch: only the logit for class 7 may move.  A random direction:
    # a constant row would move it by the sum of a LayerNorm output, which is 0 up to rounding.
    delta[7] = np.random.default_rng(0).normal(size=table.shape[1])
    x["token_ids"][x["token_ids"] == 7] = 8
    before = pre(x)["mlm_logits"].numpy()
    table.assign(table.numpy() + delta)
    after = pre(x)["mlm_logits"].numpy()
    changed = np.abs(after - before).max(axis=(0, 1)) > 1e-6
    assert changed[7] and changed.sum() == 1


def test_dropout_only_in_training(encoder):
    x = random_batch(200, batch=2, length=8)
    a = encoder(x, training=False)["sequence_output"].numpy()
    b = encoder(x, training=False)["sequence_output"].numpy()
    c = encoder(x, training=True)["sequence_output"].numpy()
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).max() > 1e-3


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_runs_with_float32_logits(policy):
    keras.utils.set_random_seed(1)
    ref = bk.BertPretrainer(bk.BertEncoder(TINY))
    enc = bk.BertEncoder(TINY, dtype=policy)
    pre = bk.BertPretrainer(enc)
    pre.set_weights(ref.get_weights())
    assert all(w.dtype == "float32" for w in pre.weights)  # variables stay float32
    x = {**random_batch(200, batch=2, length=10), "masked_positions": np.array([[1, 2], [3, 4]], "int32")}
    out, want = pre(x), ref(x)
    assert out["mlm_logits"].dtype == "float32" and out["nsp_logits"].dtype == "float32"
    assert enc(random_batch(200))["sequence_output"].dtype == ("bfloat16" if "bf" in policy else "float16")
    tol = 0.05 if "bf" in policy else 0.008  # measured 4.7e-3 (bf16), 7.4e-4 (fp16)
    np.testing.assert_allclose(out["mlm_logits"], want["mlm_logits"], atol=tol)
    clf = bk.BertClassifier(enc, num_classes=2)
    assert clf(random_batch(200)).dtype == "float32"


def _pretraining_batch(seed=0):
    rng = np.random.default_rng(seed)
    x = random_batch(200, batch=8, length=16, seed=seed)
    pos = np.sort(rng.choice(np.arange(1, 8), (8, 3)), axis=1).astype("int32")
    labels = {
        "masked_ids": np.take_along_axis(x["token_ids"], pos, 1),
        "masked_weights": np.array([[1, 1, 0]] * 8, "float32"),
        "next_sentence_label": rng.integers(0, 2, 8).astype("int32"),
    }
    return {**x, "masked_positions": pos}, labels


def test_pretrainer_loss_is_weighted_mlm_plus_nsp(encoder):
    pre = bk.BertPretrainer(encoder)
    x, y = _pretraining_batch()
    y_pred = pre(x)
    loss = float(pre.compute_loss(x, y, y_pred))
    logits = y_pred["mlm_logits"].numpy()
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ce = -np.take_along_axis(logp, y["masked_ids"][..., None], -1)[..., 0]
    mlm = (ce * y["masked_weights"]).sum() / (y["masked_weights"].sum() + 1e-5)
    nl = y_pred["nsp_logits"].numpy()
    nlogp = nl - np.log(np.exp(nl).sum(-1, keepdims=True))
    nsp = -nlogp[np.arange(8), y["next_sentence_label"]].mean()
    assert loss == pytest.approx(mlm + nsp, rel=1e-5)


def test_pretrainer_trains_with_plain_compile_and_fit(encoder):
    pre = bk.BertPretrainer(encoder)
    pre.compile(optimizer=keras.optimizers.AdamW(3e-3))
    x, y = _pretraining_batch()
    hist = pre.fit(x, y, batch_size=8, epochs=30, verbose=0).history
    assert {"loss", "mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss"} <= set(hist)
    assert hist["loss"][-1] < 0.5 * hist["loss"][0]
    assert hist["mlm_accuracy"][-1] > 0.9
    res = pre.evaluate(x, y, verbose=0, return_dict=True)
    assert res["mlm_accuracy"] > 0.9


@pytest.mark.parametrize("kind", ["encoder", "pretrainer", "classifier", "token", "span", "choice"])
def test_keras_save_and_load_is_bit_identical(tmp_path, encoder, kind):
    models = {
        "encoder": lambda: encoder,
        "pretrainer": lambda: bk.BertPretrainer(encoder),
        "classifier": lambda: bk.BertClassifier(encoder, num_classes=3, dropout=0.2),
        "token": lambda: bk.BertTokenClassifier(encoder, num_classes=4),
        "span": lambda: bk.BertSpanLabeler(encoder),
        "choice": lambda: bk.BertMultipleChoice(encoder),
    }
    model = models[kind]()
    x = random_batch(200, batch=2, length=9)
    if kind == "pretrainer":
        x["masked_positions"] = np.array([[1, 2], [3, 0]], "int32")
    if kind == "choice":
        x = {k: np.stack([v, v], axis=1) for k, v in x.items()}
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded) is type(model)
    a, b = model(x), loaded(x)
    for u, v in zip(keras.tree.flatten(a), keras.tree.flatten(b)):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
    if kind == "pretrainer":  # still tied after loading
        assert loaded.masked_lm_head.token_embedding is loaded.encoder.token_embedding


@pytest.mark.parametrize("layer", [
    bl.BertEmbeddings(100, 32, 64, 2, 0.1, 1e-12, 0.02),
    bl.BertSelfAttention(32, 4, 0.1),
    bl.TransformerBlock(32, 4, 128, "gelu"),
    bl.BertPooler(32),
])
def test_layers_round_trip_through_get_config(layer):
    clone = layer.__class__.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()


def test_activation_names_are_the_configs_and_input_names_are_written_once():
    from bert_keras import config
    from bert_keras.export import tflite
    from bert_keras.layers import activations
    from bert_keras.models import encoder, inference, inputs

    assert tuple(activations._ACTIVATIONS) == config.ACTIVATIONS
    assert encoder.INPUT_NAMES is inputs.INPUT_NAMES is inference.INPUT_NAMES is tflite.INPUT_NAMES


def test_checkpoint_names_are_the_keras_variable_paths():
    """`checkpoints.mapping.model_variables` finds each weight of the name table by its Keras
    variable path, for the encoder alone and inside a task model."""
    from bert_keras.checkpoints import mapping

    encoder = bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=100))
    for model, task in ((encoder, None), (bk.BertPretrainer(encoder), "pretraining"),
                        (bk.BertClassifier(encoder, 2), "classification")):
        found = mapping.model_variables(model)
        assert list(found) == mapping.weight_names(2, task)
        assert all(v.path == name or v.path.endswith("/" + name) for name, v in found.items())
