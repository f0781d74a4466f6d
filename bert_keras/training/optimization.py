"""Optimisers and learning-rate schedules of BERT training.

The paper's recipe: Adam with decoupled weight decay 0.01 (not on LayerNorm
parameters and biases), linear warm-up then linear decay to 0, global-norm
clipping at 1.0.  LAMB (You et al., 2019) is the large-batch alternative.
"""

from __future__ import annotations

import keras
from keras import ops

from bert_keras.errors import BertKerasError

# Keras variable names (not paths) that get no weight decay: LayerNorm scale/offset and biases.
NO_DECAY_NAMES = ("gamma", "beta", "bias")


@keras.saving.register_keras_serializable(package="bert_keras")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to ``peak`` over ``warmup_steps``, then polynomial decay.

    lr(step) = peak * step / warmup                       for step < warmup
             = (peak - end) * (1 - (step - warmup) / (total - warmup))^power + end   after
    ``power=1`` is Google's linear decay.
    """

    def __init__(self, peak_learning_rate, total_steps, warmup_steps=0, end_learning_rate=0.0, power=1.0):
        if total_steps <= 0:
            raise BertKerasError(f"total_steps must be positive, got {total_steps}")
        if not 0 <= warmup_steps <= total_steps:
            raise BertKerasError(f"warmup_steps must be in [0, total_steps={total_steps}], got {warmup_steps}")
        self.peak_learning_rate = float(peak_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.end_learning_rate = float(end_learning_rate)
        self.power = float(power)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warmup = float(max(self.warmup_steps, 1))
        warm = self.peak_learning_rate * step / warmup
        decay_steps = float(max(self.total_steps - self.warmup_steps, 1))
        progress = ops.clip((step - self.warmup_steps) / decay_steps, 0.0, 1.0)
        decayed = ((self.peak_learning_rate - self.end_learning_rate) * (1.0 - progress) ** self.power
                   + self.end_learning_rate)
        if self.warmup_steps == 0:
            return decayed
        return ops.where(step < self.warmup_steps, warm, decayed)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "total_steps": self.total_steps,
                "warmup_steps": self.warmup_steps, "end_learning_rate": self.end_learning_rate,
                "power": self.power}


# Adam's update, as three implementations write it (m, v: the moment estimates after step t):
#   "google": Google BERT's AdamWeightDecayOptimizer: no bias correction,
#             var -= lr * m / (sqrt(v) + eps)
#   "torch":  torch.optim.AdamW (Hugging Face): bias-corrected, epsilon after the correction,
#             var -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
#   "keras":  keras.optimizers.Adam(W) and TensorFlow's ResourceApplyAdam: epsilon before
#             the correction of v, i.e. the torch rule with eps / sqrt(1 - b2^t) (31.6x eps at step 1)
# All three take the decoupled decay var -= lr * wd * var first (the same in all three).
ADAM_RULES = ("google", "torch", "keras")


@keras.saving.register_keras_serializable(package="bert_keras")
class FusedAdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` with a choice of Adam update rule, one fused kernel per variable.

    Same arguments and same state (``momentums``/``velocities``) as the Keras class, which it
    subclasses (its checkpoints are interchangeable), plus ``rule``: one of `ADAM_RULES`
    ("keras", the Keras update, by default; "torch", torch's AdamW; "google", Google
    BERT's AdamWeightDecayOptimizer).  The three differ only in the bias correction and
    where epsilon enters, which matters at BERT's epsilon 1e-6 where clipped gradients are
    small: see the comment above `ADAM_RULES`.  On TensorFlow each rule is one
    ``ResourceApplyAdam`` call (which computes
    ``var -= lr * sqrt(1 - p2) / (1 - p1) * m / (sqrt(v) + eps)`` for given powers p1, p2):
    "keras" passes ``b^t``, "google" passes powers 0 (no correction) and "torch" passes
    ``eps * sqrt(1 - b2^t)``, which is the torch formula multiplied out: one kernel instead
    of about ten element-wise passes over every weight.
    """

    def __init__(self, *args, rule="keras", **kwargs):
        if rule not in ADAM_RULES:
            raise BertKerasError(f"unknown Adam rule {rule!r}; choose one of {', '.join(ADAM_RULES)}")
        super().__init__(*args, **kwargs)
        self.rule = rule

    def _clip_gradients(self, grads):
        # An embedding's gradient arrives as IndexedSlices with one row per lookup; Keras'
        # global norm squares those rows before summing the duplicates (a token seen twice
        # counts 2 g^2 instead of (2 g)^2), which is not the gradient's norm.  Summed first,
        # the clip is torch's clip_grad_norm_.  On TensorFlow the norm is tf.clip_by_global_norm's
        # (one L2 kernel per gradient; Keras' square-then-sum writes a squared copy of each).
        if self.global_clipnorm and keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
            present = [g for g in grads if g is not None]
            clipped = iter(tf.clip_by_global_norm(present, self.global_clipnorm)[0])
            return [next(clipped) if g is not None else None for g in grads]
        return super()._clip_gradients(grads)

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad:
            if self.rule != "keras":
                raise BertKerasError(f"amsgrad is only available with the keras Adam rule, not {self.rule!r}")
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        step = ops.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
        epsilon = ops.cast(self.epsilon, dtype)
        beta1_power, beta2_power = ops.power(beta_1, step), ops.power(beta_2, step)
        if self.rule == "google":
            beta1_power, beta2_power = ops.zeros_like(beta1_power), ops.zeros_like(beta2_power)
        elif self.rule == "torch":
            epsilon = epsilon * ops.sqrt(1.0 - beta2_power)
        lr = ops.cast(learning_rate, dtype)
        gradient = ops.cast(gradient, dtype)
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            tf.raw_ops.ResourceApplyAdam(
                var=variable.handle, m=m.value.handle, v=v.value.handle, beta1_power=beta1_power,
                beta2_power=beta2_power, lr=lr, beta1=beta_1, beta2=beta_2, epsilon=epsilon,
                grad=tf.convert_to_tensor(gradient))
            return
        self.assign(m, m * beta_1 + gradient * (1.0 - beta_1))
        self.assign(v, v * beta_2 + ops.square(gradient) * (1.0 - beta_2))
        alpha = lr * ops.sqrt(1.0 - beta2_power) / (1.0 - beta1_power)
        self.assign_sub(variable, alpha * m / (ops.sqrt(v) + epsilon))

    def get_config(self):
        return {**super().get_config(), "rule": self.rule}


def create_optimizer(name="adamw", learning_rate=1e-4, total_steps=1000, warmup_steps=None,
                     warmup_fraction=0.1, weight_decay=0.01, clipnorm=1.0, beta_1=0.9, beta_2=0.999,
                     epsilon=1e-6, end_learning_rate=0.0, power=1.0, gradient_accumulation_steps=None,
                     loss_scale=False, adam_rule="keras"):
    """The optimiser of BERT training.

    Args:
        name: "adamw" (Adam + decoupled weight decay, the paper) or "lamb".
        learning_rate: peak learning rate after warm-up, or a ready
            `keras.optimizers.schedules.LearningRateSchedule` (then ``total_steps``,
            ``warmup_*``, ``end_learning_rate`` and ``power`` are unused).
        total_steps: optimiser steps of the whole schedule (decay reaches
            ``end_learning_rate`` there).
        warmup_steps: linear warm-up steps; default ``warmup_fraction * total_steps``.
        weight_decay: decoupled decay, excluded for LayerNorm parameters and biases.
        clipnorm: global-norm gradient clipping (None to disable).
        gradient_accumulation_steps: apply the (averaged) gradients every k calls,
            for an effective batch k times larger.
        loss_scale: wrap in `keras.optimizers.LossScaleOptimizer` (float16 training).
        adam_rule: "adamw" only: the update rule, one of `ADAM_RULES` ("google", "torch",
            "keras"; see `FusedAdamW`).  "keras" stays the default here so that fine-tuning
            results measured with it reproduce; pre-training (`PretrainConfig`) defaults to
            "torch" (the reason is in docs/pretraining.md).
    """
    if isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        schedule = learning_rate
    else:
        if warmup_steps is None:
            warmup_steps = int(round(warmup_fraction * total_steps))
        schedule = WarmupPolynomialDecay(peak_learning_rate=learning_rate, total_steps=total_steps,
                                         warmup_steps=warmup_steps, end_learning_rate=end_learning_rate,
                                         power=power)
    common = dict(learning_rate=schedule, weight_decay=weight_decay, beta_1=beta_1, beta_2=beta_2,
                  epsilon=epsilon, global_clipnorm=clipnorm,
                  gradient_accumulation_steps=gradient_accumulation_steps)
    if name == "adamw":
        optimizer = FusedAdamW(**common, rule=adam_rule)
    elif name == "lamb":
        optimizer = keras.optimizers.Lamb(**common)
    else:
        raise BertKerasError(f"unknown optimizer {name!r}; choose adamw or lamb")
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
    if loss_scale:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
