"""Two-phase MLM + NSP pre-training (Devlin et al., 2019) on a tf.distribute strategy, or on JAX.

Phase 1 runs at sequence length 128 (20 masked-LM predictions), phase 2 at 512
(80) for the last steps, continuing phase 1's weights.  Options come from a
recipe (--config, JSON or YAML; see training/ in the repository) and the flags
below, which override it.  Rerunning the same command resumes from the last
checkpoint in --model-dir (its checkpoint takes precedence over --init); options
other than logging, checkpointing, evaluation and devices may not change on resume.
A finished run exits at once.  The final model
(encoder + MLM/NSP heads, with vocab.txt) is written to MODEL_DIR/final, a folder
that fine-tuning and bk.load_checkpoint read.

It runs on TensorFlow (tf.distribute) unless KERAS_BACKEND=jax: then on JAX, data-parallel
over the local devices (keras.distribution.DataParallel; --strategy auto/mirrored: all of
them, cpu/gpu: the first one), with its own checkpoints (checkpoints/step-N/, which a run
on PyTorch reads too); KERAS_BACKEND=torch: on PyTorch, one device.  A run resumes on the
backend family that started it (TensorFlow, or JAX/PyTorch).  The first line of output
names the backend and the devices.

examples:
  # the CPU recipe (~34 min on 2 shared cores): BERT-tiny on the Wikipedia sample, both phases
  bert-keras pretrain --config training/pretrain_mini_wiki.yaml --model-dir runs/mini_wiki

  # your own corpus (Google's format: a sentence a line, blank line between documents)
  bert-keras pretrain --preset small --vocab vocab.txt --train-files 'corpus/*.txt' \\
      --model-dir runs/small --phase1-steps 9000 --phase2-steps 1000 --batch-size 256 \\
      --gradient-accumulation-steps 8 --mixed-precision bf16

  # continued (domain-adaptive) pre-training of a released checkpoint on your text
  bert-keras pretrain --init sample:minilm --train-files corpus.txt --model-dir runs/minilm_dapt \\
      --phase1-steps 900 --phase2-steps 100 --batch-size 32 --learning-rate 5e-5

  # BERT-BASE on a Cloud TPU (see training/README.md)
  bert-keras pretrain --config training/pretrain_base_tpu.yaml --strategy tpu --tpu local \\
      --train-files 'gs://bucket/wiki/*.txt' --model-dir gs://bucket/runs/base

  # on JAX: every local accelerator (or, on a CPU, N host devices with
  # XLA_FLAGS=--xla_force_host_platform_device_count=N)
  KERAS_BACKEND=jax bert-keras pretrain --config training/pretrain_mini_wiki.yaml --model-dir runs/mini_jax

  # two workers: run on each machine with its own TF_CONFIG task index
  TF_CONFIG='{"cluster":{"worker":["h1:2222","h2:2222"]},"task":{"type":"worker","index":0}}' \\
      bert-keras pretrain --config training/pretrain_mini_wiki.yaml --strategy multiworker ...

  # two hosts on JAX: run on each machine with its own process id
  KERAS_BACKEND=jax KERAS_DISTRIBUTION_JOB_ADDRESSES=h1:1234,h2:1234 KERAS_DISTRIBUTION_NUM_PROCESSES=2 \\
      KERAS_DISTRIBUTION_PROCESS_ID=0 bert-keras pretrain --config training/pretrain_mini_wiki.yaml ...

outputs in MODEL_DIR: checkpoints/ (resumable), metrics.jsonl, tensorboard/,
eval.json (held-out MLM/NSP accuracy and trivial baselines), final/.
"""

from __future__ import annotations

import argparse
import json

from bert_keras.choices import MIXED_PRECISION

# flag -> PretrainConfig field (same meaning); None values are "not given".
_FLAGS = {
    "init": dict(metavar="CHECKPOINT", help="continue pre-training from a checkpoint folder (Google TF1, Hugging "
                                            "Face BertForPreTraining/BertForMaskedLM/BertModel, or ours; "
                                            "sample:minilm); sizes, vocabulary and casing come from it"),
    "preset": dict(help="model size: tiny, mini, small, medium, base, large (default mini; with --init "
                        "only the checkpoint's own size)"),
    "bert_config": dict(metavar="JSON", help="a BertConfig JSON instead of --preset"),
    "vocab": dict(metavar="VOCAB", help="vocab.txt (or sample:minilm, the uncased BERT vocabulary)"),
    "train_files": dict(metavar="GLOBS", help="training text: paths/globs, comma-separated, local or gs:// "
                                             "(sample:wiki: the Wikipedia sample)"),
    "eval_files": dict(metavar="GLOBS", help="held-out text for the accuracy after each phase"),
    "model_dir": dict(metavar="DIR", help="checkpoints, logs and the final model"),
    "phase1_steps": dict(type=int, metavar="N", help="optimiser steps at phase-1 length (128); "
                                                     "0 + 0 with --init writes the checkpoint as final/"),
    "phase2_steps": dict(type=int, metavar="N", help="optimiser steps at phase-2 length (512)"),
    "phase1_seq_len": dict(type=int, metavar="L"),
    "phase2_seq_len": dict(type=int, metavar="L"),
    "phase1_max_predictions": dict(type=int, metavar="P"),
    "phase2_max_predictions": dict(type=int, metavar="P"),
    "batch_size": dict(type=int, metavar="B", help="global batch per optimiser step (phase 1)"),
    "phase2_batch_size": dict(type=int, metavar="B", help="global batch in phase 2 (default: --batch-size)"),
    "gradient_accumulation_steps": dict(type=int, metavar="K", help="micro-batches per optimiser step"),
    "phase2_gradient_accumulation_steps": dict(type=int, metavar="K"),
    "optimizer": dict(choices=["adamw", "lamb"]),
    "adam_rule": dict(choices=["google", "torch", "keras"],
                      help="Adam's update: torch (default: torch/Hugging Face AdamW), google (BERT's "
                           "AdamWeightDecayOptimizer, no bias correction) or keras (epsilon before the correction)"),
    "learning_rate": dict(type=float, metavar="LR", help="peak learning rate"),
    "warmup_steps": dict(type=int, metavar="N"),
    "schedule": dict(choices=["single", "per_phase"],
                     help="one warm-up+decay over both phases (Google) or a fresh one per phase (NVIDIA)"),
    "phase2_learning_rate": dict(type=float, metavar="LR"),
    "phase2_warmup_steps": dict(type=int, metavar="N"),
    "weight_decay": dict(type=float, metavar="W"),
    "strategy": dict(choices=["auto", "cpu", "gpu", "mirrored", "multiworker", "tpu"]),
    "tpu": dict(metavar="NAME", help="TPU name or grpc:// address; 'local' on a TPU VM"),
    "mixed_precision": dict(choices=list(MIXED_PRECISION)),
    "steps_per_call": dict(type=int, metavar="N", help="optimiser steps per call of the compiled step "
                                                       "(TPU: 100+)"),
    "log_every": dict(type=int, metavar="N"),
    "checkpoint_every": dict(type=int, metavar="N"),
    "keep_checkpoints": dict(type=int, metavar="K"),
    "eval_batches": dict(type=int, metavar="N", help="held-out batches evaluated after each phase"),
    "seed": dict(type=int),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="a recipe (JSON or YAML), e.g. training/pretrain_mini_wiki.yaml")
    for field, kwargs in _FLAGS.items():
        parser.add_argument("--" + field.replace("_", "-"), dest=field, default=None, **kwargs)
    parser.add_argument("--jit-compile", dest="jit_compile", action="store_true", default=None,
                        help="compile each micro-batch's step with XLA (TensorFlow; JAX always does)")
    parser.add_argument("--whole-word-masking", dest="whole_word_masking", action="store_true", default=None)
    parser.add_argument("--cased", dest="lower_case", action="store_false", default=None,
                        help="cased vocabulary (no lower-casing)")
    parser.add_argument("--convert-checkpoints", action="store_true",
                        help="only write the run's newest checkpoint of the earlier TensorFlow format (ckpt-N) as "
                             "step-N, which every backend resumes")
    parser.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                        help="no progress bar (metrics.jsonl is still written)")


def run(args: argparse.Namespace) -> int:
    from bert_keras.training.pretrain import PretrainConfig, pretrain

    overrides = {field: getattr(args, field) for field in list(_FLAGS) + ["jit_compile", "whole_word_masking",
                                                                          "lower_case", "progress"]}
    if args.config:
        cfg = PretrainConfig.from_file(args.config, overrides)
    else:
        cfg = PretrainConfig.from_dict({k: v for k, v in overrides.items() if v is not None}, source="flags")
    result = pretrain(cfg, convert_checkpoints=True) if args.convert_checkpoints else pretrain(cfg)
    summary = {"step": result["step"], "trained_steps": result["trained_steps"],
               "final_model": result["final_model"]}
    if "eval" in result:
        summary["eval"] = result["eval"]
    print(json.dumps(summary, indent=2, default=float))
    return 0
