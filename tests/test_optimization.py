"""Optimisers and schedules against independent references (transformers, PyTorch, Keras)."""

import numpy as np
import pytest

import keras

from bert_keras.errors import BertKerasError
from bert_keras.training.optimization import WarmupPolynomialDecay, create_optimizer
from bert_keras.training.pretrain import PretrainConfig, learning_rate_schedule
from tests.conftest import reference as reference_module


def _values(schedule, steps):
    return np.array([float(keras.ops.convert_to_numpy(schedule(s))) for s in steps])


def test_warmup_linear_decay_equals_transformers_linear_schedule_with_warmup():
    torch = reference_module("torch")
    from transformers import get_linear_schedule_with_warmup

    peak, total, warmup = 1e-4, 100, 10
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    reference = get_linear_schedule_with_warmup(opt, num_warmup_steps=warmup, num_training_steps=total)
    expected = [peak * reference.lr_lambdas[0](s) for s in range(total + 5)]
    ours = _values(WarmupPolynomialDecay(peak, total, warmup), range(total + 5))
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-11)  # float32: measured 2.6e-6 relative
    assert ours[warmup] == pytest.approx(peak) and ours[total] == 0.0 and ours[warmup // 2] == pytest.approx(peak / 2)


def test_polynomial_decay_after_warmup_equals_keras_polynomial_decay():
    peak, total, warmup, end = 3e-4, 50, 5, 1e-5
    keras_decay = keras.optimizers.schedules.PolynomialDecay(peak, total - warmup, end, power=2.0)
    ours = _values(WarmupPolynomialDecay(peak, total, warmup, end, power=2.0), range(warmup, total + 3))
    expected = _values(keras_decay, range(0, total - warmup + 3))
    np.testing.assert_allclose(ours, expected, rtol=1e-6)  # measured 2.2e-7


def test_two_phase_schedules_single_continues_and_per_phase_warms_up_again():
    single = learning_rate_schedule(PretrainConfig(phase1_steps=90, phase2_steps=10, learning_rate=1e-3,
                                                   warmup_steps=10))
    values = _values(single, [0, 5, 10, 89, 90, 95, 100])
    np.testing.assert_allclose(values, [0, 5e-4, 1e-3, 1e-3 * 11 / 90, 1e-3 * 10 / 90, 1e-3 * 5 / 90, 0],
                               rtol=5e-6, atol=1e-12)  # measured 5.3e-7 relative
    nvidia = learning_rate_schedule(PretrainConfig(
        phase1_steps=90, phase2_steps=10, learning_rate=6e-3, warmup_steps=30, schedule="per_phase",
        phase2_learning_rate=4e-3, phase2_warmup_steps=4))
    values = _values(nvidia, [0, 15, 30, 89, 90, 92, 94, 97, 100])
    # measured 9.7e-7
    np.testing.assert_allclose(values, [0, 3e-3, 6e-3, 6e-3 / 60, 0, 2e-3, 4e-3, 2e-3, 0], rtol=1e-5, atol=1e-12)
    # The schedule serialises (it lives in checkpoints' optimizer config).
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(nvidia))
    np.testing.assert_allclose(_values(clone, [15, 92]), [3e-3, 2e-3], rtol=5e-7)  # measured 4.7e-8


def test_adamw_matches_pytorch_adamw_with_decay_groups_clipping_and_schedule():
    torch = reference_module("torch")
    from transformers import get_linear_schedule_with_warmup

    rng = np.random.default_rng(0)
    init = {"kernel": rng.normal(size=(4, 3)).astype("float32"), "bias": rng.normal(size=(3,)).astype("float32")}
    grads = [{k: (3.0 * rng.normal(size=v.shape)).astype("float32") for k, v in init.items()} for _ in range(4)]
    lr, wd, total, warmup = 1e-2, 0.01, 6, 2

    ours = {k: keras.Variable(v, name=k) for k, v in init.items()}
    opt = create_optimizer("adamw", lr, total_steps=total, warmup_steps=warmup, weight_decay=wd, clipnorm=1.0,
                           epsilon=1e-6)
    for g in grads:
        opt.apply([g["kernel"], g["bias"]], [ours["kernel"], ours["bias"]])

    theirs = {k: torch.nn.Parameter(torch.tensor(v)) for k, v in init.items()}
    topt = torch.optim.AdamW([{"params": [theirs["kernel"]], "weight_decay": wd},
                              {"params": [theirs["bias"]], "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.999), eps=1e-6)
    sched = get_linear_schedule_with_warmup(topt, warmup, total)
    for g in grads:
        for k, p in theirs.items():
            p.grad = torch.tensor(g[k])
        torch.nn.utils.clip_grad_norm_(list(theirs.values()), 1.0)
        topt.step()
        sched.step()
    for k in init:
        # measured 2.2e-6 abs / 1.8e-5 rel
        np.testing.assert_allclose(ours[k].numpy(), theirs[k].detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=k)
        assert not np.allclose(ours[k].numpy(), init[k])


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_no_weight_decay_on_layernorm_and_biases(name):
    import bert_keras as bk

    keras.utils.set_random_seed(0)
    model = bk.BertPretrainer(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=50)))
    variables = model.trainable_variables
    rng = np.random.default_rng(0)
    for v in variables:  # non-zero everywhere (biases and LayerNorm offsets start at 0)
        v.assign(rng.uniform(0.5, 1.5, size=v.shape).astype("float32"))
    before = [v.numpy().copy() for v in variables]
    lr, wd = 0.5, 0.01
    opt = create_optimizer(name, lr, total_steps=10, warmup_steps=0, weight_decay=wd, clipnorm=None)
    # Zero gradients: Adam/LAMB moments stay 0, so only the decoupled decay moves a weight.
    opt.apply([np.zeros(v.shape, "float32") for v in variables], variables)
    decayed, kept = [], []
    for v, b in zip(variables, before):
        if np.allclose(v.numpy(), b * (1 - lr * wd), rtol=1e-6):
            decayed.append(v.path)
        else:
            np.testing.assert_array_equal(v.numpy(), b, err_msg=v.path)
            kept.append(v.path)
    assert all(p.endswith(("gamma", "beta", "bias")) for p in kept), kept
    assert not any(p.endswith(("gamma", "beta", "bias")) for p in decayed), decayed
    layer_norms = [p for p in kept if "layer_norm" in p]
    assert len(layer_norms) == 2 * (1 + 2 * 2 + 1)  # embeddings, 2 per block x 2 blocks, MLM head
    assert "masked_lm_head/output_bias" in kept
    assert {"embeddings/token_embedding/embeddings", "embeddings/position_embeddings"} <= set(decayed)
    assert any(p.endswith("kernel") for p in decayed)


def test_create_optimizer_options():
    opt = create_optimizer("lamb", 1e-3, total_steps=100, gradient_accumulation_steps=4, loss_scale=True)
    assert isinstance(opt, keras.optimizers.LossScaleOptimizer)
    assert isinstance(opt.inner_optimizer, keras.optimizers.Lamb)
    assert opt.inner_optimizer.gradient_accumulation_steps == 4
    adamw = create_optimizer("adamw", 2e-5, total_steps=100)  # warm-up defaults to 10%
    np.testing.assert_allclose(_values(adamw._learning_rate, [5, 10]), [1e-5, 2e-5], rtol=3e-7)  # measured 2.5e-8
    schedule = WarmupPolynomialDecay(1.0, 10, 2)
    assert create_optimizer("adamw", schedule)._learning_rate is schedule
    with pytest.raises(BertKerasError, match="unknown optimizer 'sgd'"):
        create_optimizer("sgd")
    with pytest.raises(BertKerasError, match="warmup_steps"):
        WarmupPolynomialDecay(1.0, 10, 20)
