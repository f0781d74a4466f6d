"""Training: optimisers and schedules (shared by pre-training and fine-tuning) and runners.

Modules:
  optimization     `create_optimizer` (AdamW with the "google", "torch" or "keras" Adam rule,
                   or LAMB; no decay on LayerNorm and biases, clipping, accumulation, loss
                   scaling) and `WarmupPolynomialDecay`.
  distribute       `resolve_strategy("auto" | "cpu" | "gpu" | "mirrored" | "multiworker" | "tpu")`.
  pretrain_config  `PretrainConfig`, the learning-rate schedule, the options safe to change on resume.
  pretrain_model   the run's `BertPretrainer`: from a preset, or continued from a checkpoint (``init``).
  runner           `Run`, the pre-training run on every backend, handed `tensorflow_steps` or
                   `keras_runner` (the backend's step: `BertPretrainer`'s Keras-compiled one).
  evaluation       `evaluate_pretrainer` (held-out accuracy with trivial baselines).
  pretrain         `pretrain`, the two-phase runner behind `bert-keras pretrain`; every public
                   name of the modules above is importable from it as well.
"""
