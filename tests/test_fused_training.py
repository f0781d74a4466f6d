"""The fast training paths: 16-bit dropout masks and the XLA-fused bf16 training step."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_keras as bk
from bert_keras.layers import Dropout, fused, plan
from tests.conftest import random_batch

TINY = bk.BertConfig.preset("tiny", vocab_size=200, max_position_embeddings=64)


# Where each kernel the tests count lives (`bert_keras.layers.ops`), by the name the tests record.
_KERNEL_HOMES = {
    "dropout_residual_layer_norm": ("layer_norm", "dropout_residual_layer_norm"),
    "embeddings_layer_norm_dropout": ("layer_norm", "embeddings_layer_norm_dropout"),
    "layer_norm": ("layer_norm", "layer_norm_xla"),
    "layer_norm_onednn": ("layer_norm", "layer_norm_onednn"),
    "masked_softmax_dropout": ("softmax", "masked_softmax_dropout"),
    "masked_softmax": ("softmax", "masked_softmax"),
    "gelu": ("gelu", "gelu_xla"),
    "dense_gelu": ("gelu", "dense_gelu"),
    "dropout_tf": ("dropout", "dropout_tf"),
    "qkv_heads": ("attention", "qkv_heads"),
    "dense_rows": ("dense", "dense_rows"),
    "tied_logits_float32": ("dense", "tied_logits_float32"),
}


def _record_kernel_calls(monkeypatch, calls, names):
    """Wraps each named kernel of `bert_keras.layers.ops` so that a call appends its name to calls."""
    import importlib

    for name in names:
        module_name, attribute = _KERNEL_HOMES[name]
        module = importlib.import_module(f"bert_keras.layers.ops.{module_name}")
        original = getattr(module, attribute)
        monkeypatch.setattr(module, attribute, lambda *a, _f=original, _n=name: calls.append(_n) or _f(*a))


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_dropout_keeps_one_minus_rate_and_scales_by_its_inverse(dtype):
    layer = Dropout(0.1, seed=3, dtype=dtype)
    x = tf.ones((1000, 1000), layer.compute_dtype)
    y = tf.cast(layer(x, training=True), tf.float32).numpy()
    kept = y != 0
    # 10^6 draws: the binomial standard deviation of the kept fraction is 3e-4.
    assert abs(kept.mean() - 0.9) < 1.5e-3
    np.testing.assert_allclose(y[kept], 1 / 0.9, rtol=4e-3)  # bf16 rounds 1.111 to 1.109
    # Two elements share one 32-bit draw: they must still be independent, and neither half
    # of the word biased (even/odd columns; each half has 5e5 draws, sd 4e-4).
    assert abs(kept[:, 0::2].mean() - 0.9) < 2e-3 and abs(kept[:, 1::2].mean() - 0.9) < 2e-3
    assert abs((kept[:, 0::2] & kept[:, 1::2]).mean() - 0.81) < 3e-3
    assert not np.array_equal(kept, tf.cast(layer(x, training=True), tf.float32).numpy() != 0)
    np.testing.assert_array_equal(layer(x, training=False), x)


def test_dropout_mask_follows_the_seed_state():
    a, b = Dropout(0.5, seed=7), Dropout(0.5, seed=7)
    x = tf.random.normal((64, 33))  # an odd element count
    np.testing.assert_array_equal(a(x, training=True), b(x, training=True))
    assert Dropout.from_config(a.get_config()).rate == 0.5


def _pretrainer(dtype, weights=None, kernels="auto"):
    keras.utils.set_random_seed(0)
    model = bk.BertPretrainer(bk.BertEncoder(TINY, dtype=dtype, kernels=kernels))
    batch = _batch()
    model({k: batch[k] for k in ("token_ids", "segment_ids", "padding_mask", "masked_positions")})
    if weights is not None:
        model.set_weights(weights)
    return model


def _batch():
    batch = random_batch(200, batch=4, length=24)
    rng = np.random.default_rng(1)
    batch["masked_positions"] = np.sort(rng.choice(np.arange(1, 12), (4, 4)), -1).astype("int32")
    batch["masked_ids"] = rng.integers(5, 200, (4, 4)).astype("int32")
    return batch


def _loss_and_gradients(model, seed_states):
    for variable, state in zip([v for v in model.variables if "seed_generator" in v.path], seed_states):
        variable.assign(state)
    batch = _batch()
    features = {k: batch[k] for k in ("token_ids", "segment_ids", "padding_mask", "masked_positions")}
    with tf.GradientTape() as tape:
        out = model(features, training=True)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            batch["masked_ids"], tf.cast(out["mlm_logits"], tf.float32)))
        loss += tf.reduce_mean(tf.cast(out["nsp_logits"], tf.float32)[:, 0])
    grads = tape.gradient(loss, model.trainable_variables)
    return float(loss), [tf.cast(tf.convert_to_tensor(g), tf.float32).numpy() for g in grads]


def test_fused_bf16_training_step_is_as_close_to_float32_as_the_layer_by_layer_one():
    """Same weights, same dropout masks (dropout 0.1 on): loss and every gradient of the bf16
    model, fused and layer by layer (``kernels="plain"``), against the float32 model."""
    reference = _pretrainer("float32")
    seeds = [v.numpy() for v in reference.variables if "seed_generator" in v.path]
    assert len(seeds) == 1 + 3 * TINY.num_layers
    loss32, grads32 = _loss_and_gradients(reference, seeds)
    bf16 = _pretrainer("mixed_bfloat16", reference.get_weights())
    loss_fused, grads_fused = _loss_and_gradients(bf16, seeds)
    plain = _pretrainer("mixed_bfloat16", reference.get_weights(), kernels="plain")
    loss_plain, grads_plain = _loss_and_gradients(plain, seeds)

    assert abs(loss_fused - loss32) < 0.02 and abs(loss_plain - loss32) < 0.02
    for variable, g32, gf, gp in zip(bf16.trainable_variables, grads32, grads_fused, grads_plain):
        scale = np.linalg.norm(g32) + 1e-8
        err_fused, err_plain = np.linalg.norm(gf - g32) / scale, np.linalg.norm(gp - g32) / scale
        assert err_fused < 0.05, (variable.path, err_fused)
        assert err_fused < 1.5 * err_plain + 0.01, (variable.path, err_fused, err_plain)


def test_float32_training_and_bf16_inference_do_not_take_the_fused_path(monkeypatch):
    calls = []
    _record_kernel_calls(monkeypatch, calls,
                         ("dropout_residual_layer_norm", "masked_softmax_dropout", "embeddings_layer_norm_dropout"))
    batch = _batch()
    features = {k: batch[k] for k in ("token_ids", "segment_ids", "padding_mask", "masked_positions")}
    _pretrainer("float32")(features, training=True)
    _pretrainer("mixed_bfloat16")(features, training=False)
    assert calls == []
    _pretrainer("mixed_bfloat16")(features, training=True)
    assert sorted(set(calls)) == ["dropout_residual_layer_norm", "embeddings_layer_norm_dropout",
                                  "masked_softmax_dropout"]


def test_pretraining_cross_entropy_equals_tensorflows():
    from bert_keras.training.pretrain import sparse_softmax_cross_entropy

    rng = np.random.default_rng(0)
    logits = tf.constant(rng.normal(0, 4, (37, 1000)).astype("float32"))
    labels = tf.constant(rng.integers(0, 1000, 37).astype("int32"))
    weights = tf.constant(rng.uniform(0, 1, 37).astype("float32"))
    results = []
    for fn in (sparse_softmax_cross_entropy,
               lambda y, x: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=x)):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            ce = fn(labels, logits)
            loss = tf.reduce_sum(ce * weights)
        results.append((ce.numpy(), tape.gradient(loss, logits).numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], atol=1e-6)


def test_pretrainer_loss_takes_the_fused_cross_entropy_with_kerass_numbers(monkeypatch):
    """`BertPretrainer.compute_loss` on TensorFlow outside an XLA compile: the MLM cross-entropy
    is `cross_entropy.sparse_softmax_cross_entropy`, with the loss and gradients of Keras' own
    (``kernels="plain"``), masked-out targets included."""
    import keras

    import bert_keras as bk
    from bert_keras.layers import cross_entropy
    from bert_keras.models.copies import with_options

    keras.utils.set_random_seed(0)
    model = bk.BertPretrainer(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=300, dropout=0.0,
                                                                 attention_dropout=0.0)))
    plain = with_options(model, kernels="plain")
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(0, 300, (3, 16)).astype("int32"), "segment_ids": np.zeros((3, 16), "int32"),
         "padding_mask": np.ones((3, 16), "int32"), "masked_positions": rng.integers(0, 16, (3, 4)).astype("int32")}
    y = {"masked_ids": rng.integers(0, 300, (3, 4)).astype("int32"),
         "masked_weights": np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], "float32"),
         "next_sentence_label": np.array([0, 1, 0], "int32")}
    calls = []
    original = cross_entropy.sparse_softmax_cross_entropy
    monkeypatch.setattr(cross_entropy, "sparse_softmax_cross_entropy", lambda *a: calls.append(1) or original(*a))
    results = []
    for m in (model, plain):
        with tf.GradientTape() as tape:
            loss = m.compute_loss(x, y, m(x, training=True))
        grads = tape.gradient(loss, m.trainable_variables)
        results.append((float(loss), [np.asarray(tf.convert_to_tensor(g)) for g in grads]))
    assert calls == [1]  # the model with kernels="auto" only
    (fast_loss, fast_grads), (plain_loss, plain_grads) = results
    # measured: the same loss (6.4902), gradients (up to 0.41) 1.2e-7 apart at most
    assert abs(fast_loss - plain_loss) < 1e-5 and fast_loss > 1
    assert max(float(np.abs(a - b).max()) for a, b in zip(fast_grads, plain_grads)) < 1e-6


@pytest.mark.parametrize("onednn,dtype", [(True, "bfloat16"), (False, "bfloat16"), (True, "float16")])
def test_masked_softmax_dropout_equals_float32_math(monkeypatch, onednn, dtype):
    """The fused attention softmax (oneDNN softmax on bf16 scores; float32 without oneDNN and
    for float16) against float32 math: masked keys get exactly 0, kept probabilities and the gradient agree
    to bf16 rounding, and dropout keeps exactly the elements whose bits pass the threshold."""
    from bert_keras.layers.dropout import keep_threshold

    if onednn and dtype == "bfloat16" and not plan.hardware().onednn_bf16:  # the library's own rule, before the patch
        # oneDNN's bf16 softmax needs TensorFlow's oneDNN kernels and an AVX-512 CPU: on this CPU
        # the library falls back to the float32 path, and the bounds below hold for what it runs.
        onednn = False
    rng = np.random.default_rng(0)
    scores32 = tf.constant(rng.normal(0, 3, (2, 3, 16, 16)).astype("float32"))
    scores = tf.cast(scores32, dtype)
    padding = np.ones((2, 16), np.float32)
    padding[1, 11:] = 0
    bias = tf.constant((1 - padding)[:, None, None, :] * -10000.0)
    bits = tf.constant(rng.integers(0, 2**16, (2, 3, 16, 16)).astype(np.uint16))
    threshold, scale = tf.constant(keep_threshold(0.1), tf.uint16), tf.constant(1 / 0.9)
    dy = tf.constant(rng.normal(size=(2, 3, 16, 16)).astype("float32"))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(scores)
        out = fused.masked_softmax_dropout(scores, bias, bits, threshold, scale, onednn=onednn)
        keep = tf.cast(bits >= threshold, tf.float32)
        ref = tf.nn.softmax(tf.cast(scores, tf.float32) + bias) * keep * scale
    grad = tape.gradient(out, scores, output_gradients=tf.cast(dy, dtype))
    grad_ref = tape.gradient(ref, scores, output_gradients=dy)
    out, ref = tf.cast(out, tf.float32).numpy(), ref.numpy()
    assert np.all(out[1, :, :, 11:] == 0)
    np.testing.assert_array_equal(out != 0, ref != 0)
    np.testing.assert_allclose(out, ref, rtol=8e-3, atol=1e-6)
    grad, grad_ref = tf.cast(grad, tf.float32).numpy(), tf.cast(grad_ref, tf.float32).numpy()
    assert np.linalg.norm(grad - grad_ref) / np.linalg.norm(grad_ref) < 1e-2


def test_bf16_gelu_and_its_written_out_gradient_follow_the_erf_form():
    import math

    from bert_keras.layers import gelu

    values = np.linspace(-5, 5, 201).astype("float32")
    x = tf.constant(values, tf.bfloat16)
    dy = tf.constant(np.linspace(0.5, 2, 201).astype("float32"), tf.bfloat16)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = gelu(x)
    grad = tf.cast(tape.gradient(y, x, output_gradients=dy), tf.float32).numpy()
    xs = tf.cast(x, tf.float32).numpy().astype("float64")  # the bf16-rounded inputs
    cdf = np.array([0.5 * (1 + math.erf(v / math.sqrt(2))) for v in xs])
    pdf = np.exp(-0.5 * xs ** 2) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(tf.cast(y, tf.float32).numpy(), xs * cdf, rtol=8e-3, atol=1e-6)
    np.testing.assert_allclose(grad, tf.cast(dy, tf.float32).numpy() * (cdf + xs * pdf), rtol=8e-3, atol=1e-6)


def test_float32_tied_logits_and_their_gradients_are_the_float32_product():
    """The MLM projection for CPUs whose bf16 matmuls are emulated: bf16 rows times the float32
    table, forward and both gradients equal to float32 autodiff; the plain bf16 product is
    within bf16 rounding of it."""
    rng = np.random.default_rng(0)
    rows = tf.cast(tf.constant(rng.normal(size=(12, 32)).astype("float32")), tf.bfloat16)
    table = tf.Variable(rng.normal(0, 0.02, (300, 32)).astype("float32"))
    dy = tf.constant(rng.normal(size=(12, 300)).astype("float32"))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(rows)
        out = fused.tied_logits_float32(rows, table)
        ref = tf.matmul(tf.cast(rows, tf.float32), table, transpose_b=True)
        plain = tf.cast(tf.matmul(rows, tf.cast(table, tf.bfloat16), transpose_b=True), tf.float32)
    assert out.dtype == tf.float32
    grads = tape.gradient(out, [rows, table], output_gradients=dy)
    refs = tape.gradient(ref, [rows, table], output_gradients=dy)
    assert grads[0].dtype == tf.bfloat16 and grads[1].dtype == tf.float32

    def rel(a, b):
        a, b = tf.cast(a, tf.float32).numpy(), tf.cast(b, tf.float32).numpy()
        return np.linalg.norm(a - b) / np.linalg.norm(b)

    assert rel(out, ref) < 1e-5  # measured 0.0
    assert rel(grads[0], refs[0]) < 1e-5 and rel(grads[1], refs[1]) < 1e-5  # measured 0.0, 0.0
    assert 1e-4 < rel(plain, ref) < 3e-2  # measured 3.8e-3: the table rounded to bf16


@pytest.mark.parametrize("onednn", [False, True])
def test_bf16_mlm_head_takes_float32_logits_only_where_bf16_matmuls_are_emulated(monkeypatch, onednn):
    monkeypatch.setattr(plan, "hardware", lambda: plan.Hardware(onednn_bf16=onednn))
    calls = []
    _record_kernel_calls(monkeypatch, calls, ("tied_logits_float32",))
    bf16 = _pretrainer("mixed_bfloat16")
    calls.clear()  # the building call
    out = bf16(_features(), training=True)["mlm_logits"]
    bf16(_features(), training=False)
    assert len(calls) == (0 if onednn else 2) and out.dtype == "float32"
    calls.clear()
    _pretrainer("float32")(_features(), training=True)
    _pretrainer("mixed_bfloat16", kernels="plain")(_features(), training=True)
    assert calls == []


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _fit_three_times(model, jit_compile):
    """RSS (MB) after each of three `fit` calls of 6 steps, B=16, L=64."""
    rng = np.random.default_rng(0)
    b, length, p = 16, 64, 10
    x = {"token_ids": rng.integers(5, 200, (b, length)).astype("int32"),
         "segment_ids": np.zeros((b, length), "int32"), "padding_mask": np.ones((b, length), "int32"),
         "masked_positions": np.sort(rng.integers(1, length, (b, p)), -1).astype("int32")}
    y = {"masked_ids": rng.integers(5, 200, (b, p)).astype("int32"), "masked_weights": np.ones((b, p), "float32"),
         "next_sentence_label": rng.integers(0, 2, (b,)).astype("int32")}
    model.compile(optimizer=keras.optimizers.AdamW(1e-4), jit_compile=jit_compile)
    dataset = tf.data.Dataset.from_tensors((x, y)).repeat(6)
    rss, losses = [], []
    for _ in range(3):
        losses += model.fit(dataset, verbose=0).history["loss"]
        rss.append(_rss_mb())
    return rss, losses


def test_whole_step_xla_compile_gets_the_plain_graph_and_keeps_its_memory(monkeypatch):
    """`compile(jit_compile=True)` + `fit` in mixed_bfloat16: XLA compiles the plain keras.ops
    graph; no fused kernel is traced inside it.  With them nested there, every step compiled
    again: 1.3-5 seq/s instead of 200 and resident memory +560 MB a `fit` call (tiny preset,
    B=32, L=128); here, forced, 163 s and +365 MB a call, against 25 s and +0 MB."""
    model = _pretrainer("mixed_bfloat16")  # built by an eager call, which takes the 16-bit GELU kernel
    calls = []
    _record_kernel_calls(monkeypatch, calls, ("dropout_residual_layer_norm", "masked_softmax_dropout",
                                              "embeddings_layer_norm_dropout", "layer_norm", "gelu", "dropout_tf",
                                              "qkv_heads"))
    rss, losses = _fit_three_times(model, jit_compile=True)
    assert model.jit_compile and calls == []
    assert rss[2] - rss[0] < 100, rss  # measured +0 MB
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    # The same model without the whole-step compile takes the fused kernels.
    _pretrainer("mixed_bfloat16")(_features(), training=True)
    assert {"dropout_residual_layer_norm", "masked_softmax_dropout", "qkv_heads"} <= set(calls)


def _features():
    batch = _batch()
    return {k: batch[k] for k in ("token_ids", "segment_ids", "padding_mask", "masked_positions")}


def test_kernels_option_is_validated_serialised_and_plain_takes_no_kernel(monkeypatch):
    calls = []  # patched before the model is built: its building call must take none either
    _record_kernel_calls(monkeypatch, calls, ("dropout_residual_layer_norm", "masked_softmax_dropout", "gelu",
                                              "dropout_tf"))
    plain = _pretrainer("mixed_bfloat16", kernels="plain")
    plain(_features(), training=True)
    plain(_features(), training=False)
    assert calls == []
    assert plain.encoder.get_config()["kernels"] == "plain"
    assert bk.BertEncoder.from_config(plain.encoder.get_config()).transformer_layers[0].kernels == "plain"
    with pytest.raises(ValueError, match="kernels='xla'; choose one of auto, fused, plain"):
        bk.BertEncoder(TINY, kernels="xla")


def test_each_fast_variant_equals_its_plain_reference_forward_and_backward():
    """Every variant of `bert_keras.layers.ops` against the plain math of its module: the written-out
    gradients of the XLA kernels against autodiff of the reference, float32 and bf16."""
    from bert_keras.layers.ops import gelu as gelu_ops
    from bert_keras.layers.ops import layer_norm as ln
    from bert_keras.layers.ops import softmax as softmax_ops

    rng = np.random.default_rng(0)
    x32 = tf.constant(rng.normal(0, 2, (3, 5, 32)).astype("float32"))
    h32 = tf.constant(rng.normal(0, 1, (3, 5, 32)).astype("float32"))
    gamma = tf.constant(rng.uniform(0.5, 1.5, 32).astype("float32"))
    beta = tf.constant(rng.normal(0, 0.1, 32).astype("float32"))
    dy = tf.constant(rng.normal(size=(3, 5, 32)).astype("float32"))

    def value_and_grads(fn, dtype, *inputs):
        inputs = [tf.cast(t, dtype) for t in inputs]
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            y = fn(*inputs)
        grads = tape.gradient(y, inputs, output_gradients=tf.cast(dy, y.dtype))
        return [tf.cast(t, tf.float32).numpy() for t in [y, *grads]]

    keras_ln = keras.layers.LayerNormalization(epsilon=1e-12)
    keras_ln.build((None, 32))
    keras_ln.set_weights([gamma.numpy(), beta.numpy()])
    np.testing.assert_allclose(ln.layer_norm(x32, gamma, beta, 1e-12), keras_ln(x32), atol=1e-5)
    for dtype, tol in (("float32", 1e-5), ("bfloat16", 3e-2)):
        want = value_and_grads(lambda x: ln.layer_norm(x, gamma, beta, 1e-12), dtype, x32)
        got = value_and_grads(lambda x: ln.layer_norm_xla(x, gamma, beta, 1e-12), dtype, x32)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, atol=tol * max(1.0, np.abs(b).max()))
        # the add & norm with its gradient written out, dropout off, against autodiff of LN(r + h)
        want = value_and_grads(lambda h, r: ln.layer_norm(r + h, gamma, beta, 1e-12), dtype, h32, x32)
        no_mask = (None, tf.constant(0, tf.uint16), tf.constant(1.0))
        got = value_and_grads(lambda h, r: ln.dropout_residual_layer_norm(h, r, *no_mask, gamma, beta, 1e-12),
                              dtype, h32, x32)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, atol=tol * max(1.0, np.abs(b).max()))
    # the 16-bit GELU: XLA kernels and the plain float32 math, both against autodiff of float32 GELU
    want = value_and_grads(lambda x: tf.nn.gelu(x, approximate=False), "float32", x32)
    for fn in (gelu_ops.gelu, gelu_ops.gelu_xla):
        for a, b in zip(value_and_grads(fn, "bfloat16", x32), want):
            np.testing.assert_allclose(a, b, atol=3e-2 * max(1.0, np.abs(b).max()))
    np.testing.assert_allclose(gelu_ops.gelu(x32), want[0], atol=1e-6)
    # the softmax variants against the float32 reference
    scores = tf.constant(rng.normal(0, 3, (2, 3, 7, 7)).astype("float32"))
    padding = np.ones((2, 7), np.float32)
    padding[1, 4:] = 0
    bias = tf.constant((1 - padding)[:, None, None, :] * softmax_ops.MASK_VALUE)
    ref = softmax_ops.masked_softmax_float32(scores, bias).numpy()
    np.testing.assert_allclose(softmax_ops.masked_softmax(scores, bias), ref, atol=1e-6)
    np.testing.assert_allclose(softmax_ops.select_masked_softmax(scores, bias), ref, atol=1e-6)
    bf16 = tf.cast(softmax_ops.masked_softmax(tf.cast(scores, tf.bfloat16), bias, True), tf.float32)
    np.testing.assert_allclose(bf16, ref, atol=1e-2)
    # the Q/K/V split and its written-out gradient: exactly the plain split's, in bf16 (transposes,
    # and a power-of-two query scale)
    from bert_keras.layers.ops import attention as attention_ops

    qkv = tf.constant(rng.normal(0, 1, (2, 7, 3 * 32)), tf.bfloat16)
    d_heads = [tf.constant(rng.normal(0, 1, (2, 4, 7, 8)), tf.bfloat16) for _ in range(3)]
    results = []
    for split in (attention_ops.qkv_heads, lambda t, n, s: attention_ops._split_heads(t, n, 8, s)):
        with tf.GradientTape() as tape:
            tape.watch(qkv)
            heads = split(qkv, 4, 0.125)
        grad = tape.gradient(heads, qkv, output_gradients=d_heads)
        results.append([tf.cast(t, tf.float32).numpy() for t in (*heads, grad)])
    for got, want in zip(*results):
        assert got.shape == want.shape and np.abs(want).max() > 0.1
        np.testing.assert_array_equal(got, want)
