"""Training: optimisers and schedules (shared by pre-training and fine-tuning) and runners.

Modules:
  optimization  `create_optimizer` (AdamW / LAMB, no decay on LayerNorm and biases,
                clipping, accumulation, loss scaling) and `WarmupPolynomialDecay`.
  distribute    `resolve_strategy("auto" | "cpu" | "gpu" | "mirrored" | "multiworker" | "tpu")`.
  pretrain      `PretrainConfig`, `pretrain` (the two-phase MLM+NSP runner behind
                `bert-keras pretrain`), `PretrainLoop` (the distributed step),
                `evaluate_pretrainer`.
"""
