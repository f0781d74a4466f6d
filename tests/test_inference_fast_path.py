"""The inference fast path: real tokens only (`bert_keras.layers.unpadded`; the default of the
per-sequence task models, an option of the encoder), one compiled graph for every length
(`inference_function`), length-bucketed fine-tuning batches and the CLI's length-sorted
prediction batches."""

import numpy as np
import pytest

import bert_keras as bk
from bert_keras.layers import unpadded
from bert_keras.models.copies import with_options


def _record_kernel_calls(monkeypatch, calls, names):
    """Wraps each named kernel of `bert_keras.layers.ops` so that a call appends its name to calls."""
    from bert_keras.layers.ops import dense, gelu, layer_norm, softmax

    homes = {"dense_gelu": gelu, "dense_rows": dense, "masked_softmax": softmax, "layer_norm_onednn": layer_norm}
    for name in names:
        original = getattr(homes[name], name)
        monkeypatch.setattr(homes[name], name, lambda *a, _f=original, _n=name: calls.append(_n) or _f(*a))

SENTENCES = [
    "a gorgeous, witty, seductive movie.",
    "the film is strictly routine.",
    "if you sometimes like to go to the movies to have fun, wasabi is a good place to start.",
    "it's a cookie-cutter movie, a cut-and-paste job.",
    "unflinchingly bleak and desperate",
]


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    import keras

    keras.utils.set_random_seed(0)
    return bk.load_checkpoint(minilm_dir, task="classification", num_classes=2)


@pytest.fixture(scope="module")
def real_batch(minilm_dir):
    """The sentences tokenised by the project's tokenizer, padded to 24."""
    import os

    import tensorflow as tf

    tok = bk.BertTokenizer.from_vocab(os.path.join(minilm_dir, "vocab.txt"), lower_case=True)
    feats = tok(tf.constant(SENTENCES), seq_len=24)
    return {k: np.asarray(v, "int32") for k, v in feats.items()}


@pytest.fixture(scope="module")
def padded_minilm(minilm):
    """The same classifier with the option off: the padded path."""
    return with_options(minilm, real_tokens_only=False)


def _runs_real_tokens_only(fn, *args):
    import tensorflow as tf

    graph = tf.function(fn).get_concrete_function(*args).graph
    return any(unpadded.SCOPE in op.name for op in graph.get_operations())


def _hf_outputs(minilm_dir, x):
    import torch
    import transformers

    hf = transformers.BertModel.from_pretrained(minilm_dir).eval()
    with torch.no_grad():
        out = hf(input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
                 attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long),
                 token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long))
    return out.last_hidden_state.numpy(), out.pooler_output.numpy()


def test_unpadded_encoder_matches_hugging_face_on_real_sentences(minilm, minilm_dir, real_batch):
    assert real_batch["padding_mask"].sum() < real_batch["padding_mask"].size  # the batch has padding
    out = minilm.encoder(real_batch, training=False, real_tokens_only=True)
    hf_seq, hf_pooled = _hf_outputs(minilm_dir, real_batch)
    real = real_batch["padding_mask"][..., None].astype(bool)
    seq = np.asarray(out["sequence_output"])
    # measured 1.4e-6 (sequence) and 4.5e-7 (pooled)
    assert np.abs(np.where(real, seq - hf_seq, 0)).max() < 2e-5
    assert np.abs(np.asarray(out["pooled_output"]) - hf_pooled).max() < 5e-6
    # padding positions are 0 on this path (the padded path computes values nobody reads)
    assert np.abs(np.where(real, 0, seq)).max() == 0


def test_classifier_inference_runs_on_the_real_tokens_by_default_and_the_encoder_on_request(
        minilm, padded_minilm, real_batch):
    import tensorflow as tf

    specs = {k: tf.TensorSpec([None, None], tf.int32) for k in real_batch}
    assert minilm.real_tokens_only and not minilm.encoder.real_tokens_only
    assert _runs_real_tokens_only(lambda x: minilm(x, training=False), specs)
    assert not _runs_real_tokens_only(lambda x: minilm(x, training=True), specs)
    assert not _runs_real_tokens_only(lambda x: padded_minilm(x, training=False), specs)
    assert not _runs_real_tokens_only(lambda x: minilm.encoder(x, training=False), specs)
    assert _runs_real_tokens_only(lambda x: minilm.encoder(x, training=False, real_tokens_only=True), specs)
    assert bk.BertClassifier.from_config(minilm.get_config()).real_tokens_only
    assert not bk.BertClassifier.from_config(padded_minilm.get_config()).real_tokens_only


def test_unpadded_path_matches_padded_path(minilm, padded_minilm, real_batch):
    padded = padded_minilm(real_batch, training=False)
    padded_enc = minilm.encoder(real_batch, training=False)
    fast = minilm(real_batch, training=False)
    fast_enc = minilm.encoder(real_batch, training=False, real_tokens_only=True)
    real = real_batch["padding_mask"][..., None].astype(bool)
    diff = np.where(real, np.asarray(fast_enc["sequence_output"]) - np.asarray(padded_enc["sequence_output"]), 0)
    assert np.abs(diff).max() < 1e-5  # measured 9.5e-7
    assert np.abs(np.asarray(fast) - np.asarray(padded)).max() < 1e-6  # measured 6e-8
    # and the two paths are really different graphs: the padded one computes the padding
    assert np.abs(np.where(real, 0, np.asarray(padded_enc["sequence_output"]))).max() > 0.1


def test_extra_padding_to_a_fixed_length_changes_nothing(minilm, real_batch):
    """The text signatures pad to max_seq_len; the fast path runs the attention on the
    batch's longest sentence only, so 24 and 128 give the same logits."""
    wide = {k: np.pad(v, [(0, 0), (0, 104)]) for k, v in real_batch.items()}
    a = np.asarray(minilm(real_batch, training=False))
    b = np.asarray(minilm(wide, training=False))
    assert np.abs(a - b).max() < 1e-6  # measured 0.0 (the same real tokens, the same attention width)


def test_all_padding_rows_and_batches_are_defined(minilm):
    x = {k: np.zeros((2, 6), "int32") for k in ("token_ids", "segment_ids", "padding_mask")}
    out = minilm.encoder(x, training=False, real_tokens_only=True)
    assert np.asarray(out["sequence_output"]).shape == (2, 6, 384)
    assert np.abs(np.asarray(out["sequence_output"])).max() == 0


def test_bf16_unpadded_path_stays_close_to_float32(minilm_dir, minilm, real_batch):
    """mixed_bfloat16 on the fast path: softmax and LayerNorm statistics in float32."""
    import keras

    keras.utils.set_random_seed(0)
    bf16 = bk.load_checkpoint(minilm_dir, task="classification", num_classes=2, dtype="mixed_bfloat16")
    bf16.set_weights(minilm.get_weights())
    a = np.asarray(minilm.encoder(real_batch, training=False)["pooled_output"])
    fast = np.asarray(bf16.encoder(real_batch, training=False, real_tokens_only=True)["pooled_output"], "float32")
    padded = np.asarray(bf16.encoder(real_batch, training=False)["pooled_output"], "float32")
    # measured 0.016 (fast) and 0.016 (padded) against float32; pooled values are up to 0.5
    assert np.abs(fast - a).max() < 0.15
    assert np.abs(padded - a).max() < 0.15
    assert np.abs(fast - a).max() < 3 * np.abs(padded - a).max() + 1e-3


def test_bf16_inference_kernels_give_the_plain_paths_numbers(minilm_dir, minilm, real_batch, monkeypatch):
    """bf16 inference on TensorFlow: with oneDNN on AVX-512 the first FFN matmul, its bias and
    the GELU are one oneDNN kernel (`fused.dense_gelu`), the other projections oneDNN
    convolutions (`fused.dense_rows`), LayerNorm oneDNN's (`fused.layer_norm_onednn`) and the
    softmax oneDNN's bf16 kernel;
    elsewhere the FFN is the plain math and the softmax runs in float32.  The numbers are the
    plain path's to within bf16 rounding."""
    from bert_keras.layers import plan

    # Without oneDNN's bf16 kernels (no AVX-512: TensorFlow's own bf16 kernels run) the FFN keeps
    # the plain path and the softmax runs in float32; the numbers must agree either way.
    onednn = plan.current_plan("auto", "bfloat16").ffn == "onednn"
    bf16 = bk.load_checkpoint(minilm_dir, task="classification", num_classes=2, dtype="mixed_bfloat16")
    bf16.set_weights(minilm.get_weights())
    plain = with_options(bf16, kernels="plain")
    calls = []
    _record_kernel_calls(monkeypatch, calls, ("dense_gelu", "dense_rows", "masked_softmax", "layer_norm_onednn"))
    fast = bk.models.inference_function(bf16)(real_batch)
    assert calls.count("dense_gelu") == (6 if onednn else 0)  # once a layer
    assert calls.count("dense_rows") == (18 if onednn else 0)  # Q/K/V, attention output, W2
    assert calls.count("layer_norm_onednn") == (13 if onednn else 0)  # the embeddings' and two a layer
    assert calls.count("masked_softmax") == 6
    want = bk.models.inference_function(plain)(real_batch)
    reference = np.asarray(minilm(real_batch, training=False))
    fast, want = np.asarray(fast, "float32"), np.asarray(want, "float32")
    # logits up to 0.042; measured 2.1e-4 between the two bf16 paths, 2.7e-4 (fast) and 2.5e-4
    # (plain) from float32
    assert np.abs(fast - want).max() < 2e-3
    assert np.abs(fast - reference).max() < 2 * np.abs(want - reference).max() + 1e-4


def _assert_onednn_ran(primitive, body):
    """A fresh Python running ``body`` (numpy as np, tensorflow as tf and the fused kernels
    imported) executes a oneDNN ``primitive`` (a substring of its ONEDNN_VERBOSE line)."""
    import os
    import subprocess
    import sys

    code = "import numpy as np, tensorflow as tf\nfrom bert_keras.layers import fused\n" + body
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "ONEDNN_VERBOSE": "1", "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, out.stderr[-2000:]
    executed = [line for line in out.stdout.splitlines() if ",exec," in line]
    assert any(primitive in line for line in executed), executed


def test_dense_gelu_is_exact_gelu_and_one_onednn_kernel_where_onednn_runs_bf16():
    """`fused.dense_gelu` is GELU(x W + b) to bf16 rounding; where the layers choose it
    (the plan's ``ffn`` "onednn": oneDNN with AVX-512) TensorFlow's remapper must fuse the matmul, bias and
    GELU into one oneDNN kernel, else the bf16 GELU runs unfused (slower)."""
    import tensorflow as tf
    from scipy.special import erf

    from bert_keras.layers import fused, plan

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    w, b = rng.standard_normal((8, 32)).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    got = np.asarray(tf.cast(tf.function(fused.dense_gelu)(tf.constant(x, tf.bfloat16), w, b), tf.float32))
    xb = np.asarray(tf.cast(tf.cast(x, tf.bfloat16), tf.float32), np.float64)
    wb = np.asarray(tf.cast(tf.cast(w, tf.bfloat16), tf.float32), np.float64)
    z = xb.reshape(-1, 8) @ wb + np.asarray(tf.cast(tf.cast(b, tf.bfloat16), tf.float32), np.float64)
    want = (0.5 * z * (1 + erf(z / np.sqrt(2)))).reshape(2, 5, 32)
    # |GELU| up to about 12 here; measured 0.031 (one bf16 rounding of the sums and the output)
    assert np.abs(got - want).max() < 0.1 + 0.02 * np.abs(want).max()
    if plan.current_plan("auto", "bfloat16").ffn != "onednn":
        return  # no AVX-512 or no oneDNN: the layers keep the plain path (checked above)
    _assert_onednn_ran("eltwise_gelu_erf", (
        "x = tf.constant(np.random.randn(2, 5, 8), tf.bfloat16)\n"
        "w, b = tf.constant(np.random.randn(8, 32), tf.float32), tf.constant(np.zeros(32), tf.float32)\n"
        "y = tf.function(fused.dense_gelu)(x, w, b)\n"
        "assert y.shape == (2, 5, 32), y.shape\n"))


def test_dense_rows_is_the_dense_product_to_bf16_rounding():
    """`fused.dense_rows` (x W + b as a 1x1 convolution over the rows) gives the bf16 Dense
    layer's numbers, for 2-D packed rows and 3-D padded batches."""
    import keras
    import tensorflow as tf

    from bert_keras.layers import fused

    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((32, 48)).astype(np.float32) * 0.2, rng.standard_normal(48).astype(np.float32)
    layer = keras.layers.Dense(48, dtype="mixed_bfloat16")
    layer.build((None, 32))
    layer.set_weights([w, b])
    assert fused.plain_dense(layer) and not fused.plain_dense(keras.layers.Dense(4, activation="relu"))
    for shape in ((7, 32), (3, 5, 32)):
        x = tf.constant(rng.standard_normal(shape), tf.bfloat16)
        got = np.asarray(tf.cast(tf.function(fused.dense_rows)(x, w, b), tf.float32))
        want = np.asarray(tf.cast(layer(x), tf.float32))
        x64 = np.asarray(tf.cast(x, tf.float32), np.float64)
        exact = x64 @ np.asarray(tf.cast(tf.cast(w, tf.bfloat16), tf.float32), np.float64) + b
        assert got.shape == shape[:-1] + (48,)
        # |y| up to 4.8; measured 0.031 from the Dense layer's output and 0.018 from the exact
        # product of the bf16 operands (a bf16 rounding of each output)
        assert np.abs(got - want).max() < 0.3
        assert np.abs(got - exact).max() < 0.3


def test_layer_norm_onednn_is_layer_norm_and_one_onednn_kernel_where_onednn_runs_bf16():
    """`fused.layer_norm_onednn` is LayerNorm (BERT's epsilon, float32 statistics) to bf16
    rounding, with a static or a run-time row count; where the layers choose it
    (the plan's ``layer_norm`` "onednn") TensorFlow's remapper must turn it into oneDNN's layer normalisation."""
    import tensorflow as tf

    from bert_keras.layers import fused, plan

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 7, 64)) * 3 + rng.standard_normal((3, 7, 1))).astype(np.float32)
    # one row of nearly equal values: the variance is tiny and BERT's epsilon (1e-12) matters
    x[0, 0] = 0.5 + 1e-3 * rng.standard_normal(64)
    gamma, beta = (rng.random(64) + 0.5).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    xb = tf.cast(x, tf.bfloat16)
    x64 = np.asarray(tf.cast(xb, tf.float32), np.float64)
    mean, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    want = (x64 - mean) / np.sqrt(var + 1e-12) * gamma + beta
    for spec in (tf.TensorSpec([3, 7, 64], tf.bfloat16), tf.TensorSpec([None, None, 64], tf.bfloat16)):
        fn = tf.function(lambda t: fused.layer_norm_onednn(t, gamma, beta, 1e-12), input_signature=[spec])
        got = np.asarray(tf.cast(fn(xb), tf.float32))
        # |LN| up to 4.9 here; measured 0.021 (static) and 0.017 (run-time rows: oneDNN's kernel);
        # with epsilon 1.001e-5 the nearly constant row would be off by 2.7
        assert np.abs(got - want).max() < 0.2, (spec, np.abs(got - want).max())
    if plan.current_plan("auto", "bfloat16").ffn != "onednn":
        return  # no AVX-512 or no oneDNN: the layers keep Keras' LayerNormalization
    # random gamma and beta: TensorFlow's optimiser drops a multiply by ones and an add of zeros,
    # and with them the pattern
    _assert_onednn_ran("layer_normalization", (
        "g, b = np.random.rand(8).astype('float32') + 0.5, np.random.randn(8).astype('float32')\n"
        "fn = tf.function(lambda t: fused.layer_norm_onednn(t, g, b, 1e-12),\n"
        "                 input_signature=[tf.TensorSpec([None, 8], tf.bfloat16)])\n"
        "y = fn(tf.constant(np.random.randn(5, 8), tf.bfloat16))\n"
        "assert y.shape == (5, 8), y.shape\n"))


def test_the_packed_attention_bias_has_its_unit_axes_in_its_static_shape():
    """The bias the packed attention adds is [B, 1, 1, length] in the graph's static shape:
    TensorFlow's remapper fuses the query scale and this add into the oneDNN scores matmul only
    when it can see the broadcast (MiniLM bf16, B=32 on an AMX CPU: 68 -> 64 ms a batch)."""
    import tensorflow as tf

    from bert_keras.layers.attention import attention_bias_from_padding_mask

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def bias_of(mask):
        bias = unpadded.Packing(mask).attention_bias(attention_bias_from_padding_mask(mask))
        assert bias.shape.as_list() == [None, 1, 1, None], bias.shape
        return bias

    got = np.asarray(bias_of(tf.constant([[1, 1, 0, 0], [1, 1, 1, 0]], tf.int32)))
    np.testing.assert_array_equal(got[:, 0, 0], [[0, 0, -10000], [0, 0, 0]])


def test_inference_function_traces_once_for_every_length(minilm, real_batch):
    from bert_keras.models import inference_function

    fn = inference_function(minilm)
    assert inference_function(minilm) is fn
    longest = int(real_batch["padding_mask"].sum(-1).max())
    outs = [np.asarray(fn({k: v[:, :n] for k, v in real_batch.items()})) for n in (longest, longest + 1, 24)]
    assert fn.experimental_get_tracing_count() == 1
    eager = np.asarray(minilm(real_batch, training=False))
    for out in outs:
        assert np.abs(out - eager).max() < 1e-6  # measured 6e-8


def test_constant_weights_function_gives_the_same_numbers_from_the_weights_it_was_built_with(
        minilm_dir, minilm, real_batch):
    """`inference_function(model, constant_weights=True)`: the graph with the weights baked in as
    constants gives the variable-reading graph's outputs (a mixed_bfloat16 classifier: its weight
    casts folded; the encoder: its dict of outputs), and keeps them when the weights change."""
    from bert_keras.models import inference_function

    bf16 = bk.load_checkpoint(minilm_dir, task="classification", num_classes=2, dtype="mixed_bfloat16")
    bf16.set_weights(minilm.get_weights())
    live, frozen = inference_function(bf16), inference_function(bf16, constant_weights=True)
    ops = {op.type for op in frozen.get_concrete_function().graph.get_operations()}
    assert "Const" in ops and not ops & {"ReadVariableOp", "ResourceGather", "VarHandleOp"}, ops
    before, baked = np.asarray(live(real_batch), "float32"), np.asarray(frozen(real_batch), "float32")
    reference = np.asarray(minilm(real_batch, training=False))
    # logits up to 0.042; bf16 rounding apart (TensorFlow picks other kernels for constants):
    # measured 8.9e-5 between the two, 3.0e-4 (variables) and 3.3e-4 (constants) from float32
    assert np.abs(baked - before).max() < 1e-3
    assert np.abs(baked - reference).max() < 2 * np.abs(before - reference).max() + 1e-4
    head = bf16.layers[-1].kernel
    head.assign(head * 2.0)
    assert np.abs(np.asarray(live(real_batch), "float32") - before).max() > 0.01
    np.testing.assert_array_equal(np.asarray(frozen(real_batch), "float32"), baked)

    encoder = minilm.encoder
    want = inference_function(encoder)(real_batch)
    got = inference_function(encoder, constant_weights=True)(real_batch)
    assert sorted(got) == sorted(want) == ["pooled_output", "sequence_output"]
    for name in want:  # measured 0.0 / 0.0
        assert np.abs(np.asarray(got[name]) - np.asarray(want[name])).max() < 1e-6, name


def test_constant_weights_saved_model_holds_one_copy_of_the_weights_and_no_variables(
        minilm_dir, minilm, real_batch, tmp_path):
    """`export_saved_model(model, out, constant_weights=True)`: both signatures call one
    constant-weights function, so the graph holds the weights once and `variables/` nothing;
    `serve_ids` gives `inference_function(model, constant_weights=True)`'s logits."""
    import os

    import tensorflow as tf

    from bert_keras.models import inference_function
    from bert_keras.models.inference import constant_weights_call

    bf16 = bk.load_checkpoint(minilm_dir, task="classification", num_classes=2, dtype="mixed_bfloat16")
    bf16.set_weights(minilm.get_weights())
    out = bk.export_saved_model(bf16, str(tmp_path / "bf16" / "1"), constant_weights=True)
    weights = sum(int(np.prod(w.shape)) * 4 for w in bf16.weights)  # 90.9 MB
    graph = os.path.getsize(os.path.join(out, "saved_model.pb"))
    stored = sum(os.path.getsize(os.path.join(out, "variables", f)) for f in os.listdir(os.path.join(out, "variables")))
    assert weights < graph < 1.2 * weights and stored < 10_000, (weights, graph, stored)  # measured 93 MB, 683 B
    served = tf.saved_model.load(out).signatures["serve_ids"](**{k: tf.constant(v) for k, v in real_batch.items()})
    want = np.asarray(inference_function(bf16, constant_weights=True)(real_batch))
    assert np.abs(served["logits"].numpy() - want).max() < 1e-6  # measured 0.0

    fn = constant_weights_call(bf16)
    fn.get_concrete_function()
    fn.release_weights()
    np.testing.assert_array_equal(np.asarray(fn(real_batch)), want)  # the traced graph keeps them
    with pytest.raises(RuntimeError, match="traced again after release_weights"):
        fn.python_function(real_batch)  # what a new trace would run


def test_finetuning_predict_equals_the_model_on_the_whole_batch(minilm, padded_minilm, real_batch):
    from bert_keras import finetuning

    wide = {k: np.pad(v, [(0, 0), (0, 8)]) for k, v in real_batch.items()}
    logits = finetuning.predict(minilm, wide, batch_size=2)
    reference = np.asarray(padded_minilm(wide, training=False))
    assert logits.shape == (5, 2)
    assert np.abs(logits - reference).max() < 1e-5  # measured 1.2e-7


def test_training_batches_are_cut_to_multiples_of_eight():
    from bert_keras import finetuning
    from bert_keras.tasks import IGNORE_LABEL

    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 60, 100)
    mask = (np.arange(64)[None] < lengths[:, None]).astype("int32")
    inputs = {"token_ids": mask * 7, "segment_ids": np.zeros_like(mask), "padding_mask": mask}
    labels = np.where(mask == 1, 1, IGNORE_LABEL).astype("int32")  # per-token labels, NER-style
    seen = set()
    total = 0
    for x, y in finetuning.training_dataset(inputs, labels, 8, seed=0):
        width = x["padding_mask"].shape[1]
        longest = int(np.asarray(x["padding_mask"]).sum(-1).max())
        assert width % 8 == 0 and longest <= width < longest + 8
        assert y.shape[1] == width
        # the extra positions keep the featurizer's padding: ignored labels, 0 ids
        assert np.all(np.asarray(y)[np.asarray(x["padding_mask"]) == 0] == IGNORE_LABEL)
        seen.add(width)
        total += len(y)
    assert total == 100 and len(seen) <= 8


def test_cli_predict_batches_by_length_and_keeps_input_order():
    from bert_keras.cli.predict import _by_length

    class Echo:
        batches = []

        def predict(self, texts, texts_b=None, batch_size=32):
            for i in range(0, len(texts), batch_size):
                self.batches.append(texts[i:i + batch_size])
                yield from ({"text": t} for t in texts[i:i + batch_size])

    texts = ["a" * n for n in (9, 1, 30, 2, 8, 31, 3)]
    echo = Echo()
    records = _by_length(echo, texts, None, 2)
    assert [r["text"] for r in records] == texts
    assert echo.batches == [["a", "aa"], ["aaa", "a" * 8], ["a" * 9, "a" * 30], ["a" * 31]]


def test_predict_on_arrays_batches_them_in_order_without_keras_array_adapter(minilm, real_batch, monkeypatch):
    import keras
    import tensorflow as tf

    seen = []
    keras_predict = keras.Model.predict

    def spy(self, x, *args, **kwargs):
        seen.append(x)
        return keras_predict(self, x, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "predict", spy)
    out = minilm.predict(real_batch, batch_size=2, verbose=0)  # 5 rows: batches of 2, 2, 1
    given = seen[-1]
    assert isinstance(given, tf.data.Dataset) and given.options().autotune.enabled is False
    assert [int(b["token_ids"].shape[0]) for b in given] == [2, 2, 1]
    reference = np.concatenate([np.asarray(minilm.predict_on_batch({k: v[i:i + 2] for k, v in real_batch.items()}))
                                for i in (0, 2, 4)])
    assert out.shape == (5, 2)
    assert np.abs(out - reference).max() < 1e-5  # measured 0.0
    dataset = tf.data.Dataset.from_tensors(real_batch)  # anything else goes to Keras as it is
    np.testing.assert_allclose(minilm.predict(dataset, verbose=0), out, atol=1e-5)
    assert seen[-1] is dataset
