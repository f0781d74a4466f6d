"""Throughput of one pre-training step (forward, backward, AdamW) per preset and length.

    python benchmarks/bench_pretrain_step.py --preset mini --seq-len 128 --batch-size 32 --steps 10
    python benchmarks/bench_pretrain_step.py --preset base --seq-len 512 --batch-size 8 \\
        --mixed-precision bf16 --jit-compile --strategy auto

Feeds random token ids (the input pipeline is measured by bench_input_pipeline.py)
through `BertPretrainer`'s step as `bert-keras pretrain` runs it on TensorFlow (Keras' train
function, ``--steps-per-call`` steps a call, k micro-batches stacked per step;
`tensorflow_steps.train_steps`), after one warm-up call that traces and compiles, and prints one
JSON line: steps/s, sequences/s, tokens/s and the settings.  Run in a checkout from before the
runner took Keras' step (`benchmarks/bench_checkouts.py`), it times that checkout's `PretrainLoop`.
"""

import argparse
import json
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--vocab-size", type=int, default=30522)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--max-predictions", type=int, default=None, help="default: seq_len * 0.15 rounded")
    parser.add_argument("--batch-size", type=int, default=32, help="global batch")
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--steps-per-call", type=int, default=5)
    parser.add_argument("--mixed-precision", default="none", choices=["none", "bf16", "fp16"])
    parser.add_argument("--jit-compile", action="store_true")
    parser.add_argument("--strategy", default="cpu")
    args = parser.parse_args(argv)

    import numpy as np
    import tensorflow as tf

    from bert_keras.training.distribute import resolve_strategy
    from bert_keras.training.optimization import create_optimizer
    from bert_keras.training.pretrain import PretrainConfig, build_pretrainer

    try:
        from bert_keras.training.tensorflow_steps import train_steps
    except ImportError:  # a checkout of the earlier runner: its `PretrainLoop`
        train_steps = None

    strategy = resolve_strategy(args.strategy)
    predictions = args.max_predictions or max(1, round(args.seq_len * 0.15))
    cfg = PretrainConfig(preset=args.preset, phase1_seq_len=args.seq_len, phase2_steps=0,
                         phase1_max_predictions=predictions, mixed_precision=args.mixed_precision)
    with strategy.scope():
        model = build_pretrainer(cfg, args.vocab_size)
        optimizer = create_optimizer("adamw", 1e-4, total_steps=10**6, clipnorm=1.0 if train_steps else None,
                                     loss_scale=args.mixed_precision == "fp16")
        optimizer.build(model.trainable_variables)
        if train_steps:
            model.compile(optimizer=optimizer)
    if train_steps:
        from bert_keras.training.tensorflow_steps import train_function

        function = train_function(model, args.jit_compile)
        train = lambda iterator, n: train_steps(model, iterator, n, function)  # noqa: E731
    else:
        from bert_keras.training.loop import PretrainLoop

        loop = PretrainLoop(model, optimizer, strategy, clipnorm=1.0, jit_compile=args.jit_compile)
        train = lambda iterator, n: loop.train(iterator, n, args.accumulation)  # noqa: E731

    micro = args.batch_size // args.accumulation
    rng = np.random.default_rng(0)

    def dataset_fn(ctx):
        b, length = ctx.get_per_replica_batch_size(micro), args.seq_len
        features = {"token_ids": rng.integers(5, args.vocab_size, (b, length), dtype=np.int32),
                    "segment_ids": (np.arange(length)[None] >= length // 2).repeat(b, 0).astype(np.int32),
                    "padding_mask": np.ones((b, length), np.int32),
                    "masked_positions": np.sort(rng.choice(np.arange(1, length), (b, predictions)), -1)
                    .astype(np.int32)}
        labels = {"masked_ids": rng.integers(5, args.vocab_size, (b, predictions), dtype=np.int32),
                  "masked_weights": np.ones((b, predictions), np.float32),
                  "next_sentence_label": rng.integers(0, 2, (b,), dtype=np.int32)}
        ds = tf.data.Dataset.from_tensors((features, labels)).repeat()
        # the runner's step takes the k micro-batches of a step stacked
        return ds.batch(args.accumulation, drop_remainder=True) if train_steps and args.accumulation > 1 else ds

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    train(iterator, args.steps_per_call)  # trace + compile
    start = time.perf_counter()
    done = 0
    while done < args.steps:
        n = min(args.steps_per_call, args.steps - done)
        train(iterator, n)
        done += n
    seconds = time.perf_counter() - start
    print(json.dumps({
        "preset": args.preset, "seq_len": args.seq_len, "batch_size": args.batch_size,
        "accumulation": args.accumulation, "mixed_precision": args.mixed_precision,
        "jit_compile": args.jit_compile, "replicas": strategy.num_replicas_in_sync,
        "steps_per_second": done / seconds, "sequences_per_second": done * args.batch_size / seconds,
        "tokens_per_second": done * args.batch_size * args.seq_len / seconds,
        "parameters": int(sum(np.prod(v.shape) for v in model.trainable_variables)),
    }))


if __name__ == "__main__":
    main()
