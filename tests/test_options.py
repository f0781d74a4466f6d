"""Execution choices are options of a model, read from the model while a call is traced: no
module or class switch, thread-safe, and the exporters never change the caller's model."""

import ast
import os
import threading

import keras
import numpy as np
import tensorflow as tf

import bert_keras as bk
from bert_keras.layers import BertSelfAttention, LayerNorm, fused, unpadded
from tests.conftest import random_batch

PACKAGE = os.path.dirname(bk.__file__)
TINY = bk.BertConfig.preset("tiny", vocab_size=200, max_position_embeddings=64)


def _sources(*folders):
    for folder in folders:
        for name in sorted(os.listdir(os.path.join(PACKAGE, folder))):
            if name.endswith(".py"):
                path = os.path.join(PACKAGE, folder, name)
                with open(path, encoding="utf-8") as f:
                    yield f"{folder}/{name}", ast.parse(f.read())


def test_no_module_or_class_switch_in_the_model_code():
    """Module-level names of layers/ and models/ are constants (tuples, strings, numbers) or
    caches of compiled functions; no `global` statement; no class attribute of a layer that a
    caller could flip (the masking, the LayerNorm stream scales and the fast-path choices are
    constructor options)."""
    constant = (ast.Constant, ast.Tuple, ast.UnaryOp, ast.List)
    caches = {"_CACHE", "_FUNCTIONS", "_ACTIVATIONS"}  # compiled kernels, inference functions, a name table
    found = []
    for name, tree in _sources("layers", "models"):
        for node in tree.body:
            if isinstance(node, ast.Assign):
                targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if not isinstance(node.value, constant) and not set(targets) <= caches:
                    found.append(f"{name}: module-level {targets}")
            if isinstance(node, ast.ClassDef):
                found += [f"{name}: {node.name}.{t.id}" for stmt in node.body if isinstance(stmt, ast.Assign)
                          for t in stmt.targets if isinstance(t, ast.Name) and not t.id.startswith("_")]
        found += [f"{name}: global {n.names}" for n in ast.walk(tree) if isinstance(n, ast.Global)]
    assert found == []
    for gone in ("ENABLED", "ACTIVE", "disabled", "enabled", "use_fused_training"):
        assert not hasattr(fused, gone) and not hasattr(unpadded, gone), gone
    assert "masking" not in vars(BertSelfAttention) and "stream_scales" not in vars(LayerNorm)


def _xla_calls(graph):
    """Names of the XLA-compiled functions a graph calls (the fused kernels)."""
    calls = []
    for op in graph.get_operations():
        try:
            must_compile = op.get_attr("_XlaMustCompile")
        except ValueError:
            continue
        if must_compile:
            calls.append(op.name)
    return calls


def _trace_training_step(model, batch):
    specs = {k: tf.TensorSpec([None, None], tf.int32) for k in batch}

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            loss = tf.reduce_mean(tf.cast(out["pooled_output"], tf.float32))
        return tape.gradient(loss, model.trainable_variables)

    return step.get_concrete_function(specs).graph


def test_two_models_traced_at_once_in_two_threads_keep_their_own_choice():
    keras.utils.set_random_seed(0)
    models = {kernels: bk.BertEncoder(TINY, dtype="mixed_bfloat16", kernels=kernels)
              for kernels in ("auto", "plain")}
    batch = random_batch(200, batch=2, length=8)
    for model in models.values():
        model(batch)
    graphs, errors = {}, []

    def trace(kernels):
        try:
            for _ in range(3):
                graphs.setdefault(kernels, []).append(_trace_training_step(models[kernels], batch))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=trace, args=(k,)) for k in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # the fused bf16 training graph calls XLA kernels in every block; the plain one none
    assert all(len(_xla_calls(g)) >= 2 * TINY.num_layers for g in graphs["auto"])
    assert all(_xla_calls(g) == [] for g in graphs["plain"])


def test_exports_trace_a_copy_and_leave_the_callers_model_as_it_was():
    from bert_keras.models.copies import with_options

    keras.utils.set_random_seed(0)
    clf = bk.BertClassifier(bk.BertEncoder(TINY), 2)
    batch = random_batch(200, batch=3, length=10, seed=1)
    want = np.asarray(clf(batch, training=False))
    config, weights = clf.get_config(), [np.array(w) for w in clf.get_weights()]
    select = with_options(clf, masking="select", real_tokens_only=False)
    assert select is not clf and not select.real_tokens_only and not select.encoder.real_tokens_only
    assert {block.attention.masking for block in select.encoder.transformer_layers} == {"select"}
    np.testing.assert_allclose(np.asarray(select(batch, training=False)), want, atol=1e-6)  # measured 1e-7
    select.encoder.transformer_layers[0].attention.qkv.kernel.assign(
        np.zeros_like(weights[0], shape=select.encoder.transformer_layers[0].attention.qkv.kernel.shape))
    assert clf.get_config() == config
    for a, b in zip(clf.get_weights(), weights):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.asarray(clf(batch, training=False)), want)


def test_kernel_plan_is_decided_once_from_its_inputs():
    """`plan.kernel_plan` is a function of its inputs: the fast kernels only on TensorFlow outside
    an XLA compile; "auto" not on a GPU; the 16-bit kernels only in 16 bits; oneDNN's only in bf16
    inference with oneDNN; the 16-bit dropout masks and the fused cross-entropy in every dtype."""
    from bert_keras.layers import plan

    cpu, amx, gpu = plan.Hardware(), plan.Hardware(onednn_bf16=True), plan.Hardware(gpu=True)
    assert plan.kernel_plan("plain", "bfloat16", True, hardware=amx) == plan.KernelPlan(packing=False)
    train = plan.kernel_plan("auto", "bfloat16", True, hardware=amx)
    assert (train.attention, train.add_norm, train.layer_norm, train.gelu, train.dropout, train.loss) == (
        "xla", "xla", "xla", "xla", "bits16", "xla")
    assert train.softmax == "onednn" and train.mlm_logits == "matmul" and not train.packing
    assert plan.kernel_plan("auto", "bfloat16", True, hardware=cpu).mlm_logits == "float32"
    infer = plan.kernel_plan("auto", "bfloat16", False, hardware=amx)
    assert (infer.ffn, infer.dense, infer.layer_norm, infer.attention, infer.packing) == (
        "onednn", "onednn", "onednn", "plain", True)
    f32 = plan.kernel_plan("auto", "float32", True, hardware=amx)
    assert (f32.add_norm, f32.layer_norm, f32.gelu, f32.softmax, f32.dropout, f32.loss) == (
        "plain", "keras", "plain", "float32", "bits16", "xla")
    assert plan.kernel_plan("auto", "bfloat16", True, hardware=amx, xla_compile=True) == plan.KernelPlan()
    assert plan.kernel_plan("auto", "bfloat16", True, hardware=gpu).dropout == "keras"
    assert plan.kernel_plan("fused", "bfloat16", True, hardware=gpu).attention == "xla"
    packed = plan.kernel_plan("auto", "bfloat16", False, packed=True, hardware=cpu)
    assert packed.gelu == "plain" and packed.softmax == "tensorflow"
    for backend in ("jax", "torch"):
        other = plan.kernel_plan("auto", "bfloat16", True, backend=backend, hardware=amx)
        assert other == plan.KernelPlan(attention="sdpa")
        assert other.attention_for("additive", True) == "plain"
        assert other.attention_for("additive", False) == "sdpa"
    assert infer.attention_for("select", False) == "plain" and infer.softmax_for("select") == "select"
