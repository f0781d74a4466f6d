"""Where an inference call's time goes: TensorFlow profiler time per op type, on real sentences.

The model and inputs of bench_inference.py (MiniLM + a 2-class head, the Rotten Tomatoes dev
snippets in file order, tokenised once; prepared in --work and reused), with the same threads
(TensorFlow intra-op 2 / inter-op 1).  `inference_function(model)` runs batches of
--batch-size consecutive snippets padded to their longest member (batch 1: each snippet at its
own length) on the real-tokens-only path, as bench_inference.py's ``ours-compiled`` does:

  * wall time per call: p50 over the calls, after one warm-up pass;
  * a profiled pass (tf.profiler): the kernel time of each op type per call, its share of the
    kernel time and its count per call; MatMul's arithmetic rate (2 * tokens * in * out FLOPs
    summed over the model's dense layers, over the matmul kernels' time);
  * with --constant-weights: the same on `inference_function(model, constant_weights=True)`
    (the weights baked into the graph as constants), timed interleaved and profiled instead;
  * with --xla-multiple N > 0: the p50 of an XLA-compiled call (``jit_compile=True``) on the
    padded path, each batch padded to a multiple of N (one compilation per multiple), timed
    interleaved with the graph call.

    python benchmarks/profile_inference.py                       # batch 1, 200 snippets, ~3 min
    python benchmarks/profile_inference.py --batch-size 32 --calls 40 --dtype mixed_bfloat16
"""

import argparse
import collections
import glob
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_inference  # noqa: E402  (its preparation, threads and constants)


def batches(ids, mask, batch_size, calls):
    """``calls`` batches of consecutive snippets, each cut to its longest member."""
    out = []
    for start in range(0, len(ids), batch_size):
        if len(out) == calls:
            break
        m = mask[start:start + batch_size]
        length = int(m.sum(-1).max())
        out.append({"token_ids": ids[start:start + batch_size, :length],
                    "segment_ids": np.zeros_like(m[:, :length]), "padding_mask": m[:, :length]})
    return out


def dense_flops(model, tokens, examples):
    """2 * rows * in * out over the model's dense kernels: a row per real token in the encoder's
    blocks, a row per example in the pooler and the head."""
    total = 0
    for w in model.weights:
        if w.path.endswith("kernel") and len(w.shape) == 2 and "embedding" not in w.path:
            rows = tokens if "transformer_layer" in w.path else examples
            total += 2 * rows * int(w.shape[0]) * int(w.shape[1])
    return total


def p50_ms(fn, feeds):
    ms = []
    for feed in feeds:
        start = time.perf_counter()
        np.asarray(fn(feed))
        ms.append((time.perf_counter() - start) * 1e3)
    return float(np.percentile(ms, 50))


def op_times(logdir, calls):
    """{op type: (kernel microseconds per call, kernels per call)} from the profiler's trace."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")))[-1], "rb") as f:
        space.ParseFromString(f.read())
    micros, counts = collections.defaultdict(float), collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" not in name or "::" in name:  # executor and thread-pool bookkeeping, not kernels
                    continue
                op = name.rsplit(":", 1)[1]
                micros[op] += event.duration_ps / 1e6
                counts[op] += 1
    return {op: (micros[op] / calls, counts[op] / calls) for op in micros}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--calls", type=int, default=200, help="batches timed and profiled")
    p.add_argument("--dtype", default="float32", choices=("float32", "mixed_bfloat16", "bfloat16"),
                   help="the model's dtype policy (bfloat16: weights stored in bf16)")
    p.add_argument("--constant-weights", action="store_true",
                   help="also time inference_function(model, constant_weights=True) and profile it")
    p.add_argument("--xla-multiple", type=int, default=16,
                   help="also time an XLA-compiled call on lengths padded to this multiple (0: off)")
    p.add_argument("--rounds", type=int, default=3, help="timing rounds over the calls")
    p.add_argument("--model-dir", help="a fine-tuned classification folder (default: bench_inference.py's)")
    p.add_argument("--train-examples", type=int, default=2000)
    p.add_argument("--work", default="runs/bench_inference", help="bench_inference.py's artefacts (reused)")
    p.add_argument("--json", help="write the result here (default: print only)")
    args = p.parse_args(argv)
    bench_inference.pin_threads()
    bench_inference.pin_tensorflow_threads()
    import tensorflow as tf

    prep = argparse.Namespace(work=args.work, model_dir=args.model_dir, train_examples=args.train_examples,
                              runners=["ours-compiled"], tflite_seq_len=None, tflite_buckets="none")
    info = bench_inference.prepare(prep)
    from bert_keras.checkpoints import load_checkpoint
    from bert_keras.models import inference_function
    from bert_keras.writing import write_json

    data = np.load(os.path.join(args.work, "dev.npz"))
    feeds = batches(data["token_ids"], data["padding_mask"], args.batch_size, args.calls)
    model = load_checkpoint(info["model_dir"], task="classification",
                            dtype=None if args.dtype == "float32" else args.dtype)
    fn = inference_function(model)  # the classifier's default: the real tokens only
    fn.get_concrete_function()
    runs = {"inference_function": fn}
    if args.constant_weights:
        fn = runs["constant_weights"] = inference_function(model, constant_weights=True)  # profiled
    if args.xla_multiple:
        @tf.function(jit_compile=True, autograph=False)
        def xla(inputs):
            return model(inputs, training=False)

        def xla_padded(feed, multiple=args.xla_multiple):
            length = feed["token_ids"].shape[1]
            pad = -(-length // multiple) * multiple - length
            return xla({k: np.pad(v, [(0, 0), (0, pad)]) for k, v in feed.items()})

        runs[f"xla_multiple_{args.xla_multiple}"] = xla_padded
    for run in runs.values():  # warm-up: every XLA length compiles here
        p50_ms(run, feeds)
    wall = {name: [] for name in runs}
    for _ in range(args.rounds):  # interleaved, so load drift hits both
        for name, run in runs.items():
            wall[name].append(p50_ms(run, feeds))

    logdir = tempfile.mkdtemp(prefix="profile_inference_")
    tf.profiler.experimental.start(logdir)
    for feed in feeds:
        np.asarray(fn(feed))
    tf.profiler.experimental.stop()
    ops = op_times(logdir, len(feeds))
    kernel_us = sum(us for us, _ in ops.values())
    tokens = float(np.mean([f["padding_mask"].sum() for f in feeds]))
    # the dense layers' kernels: MatMul and the 1x1 convolutions of bf16 inference (not BatchMatMulV2)
    matmul_us = sum(us for op, (us, _) in ops.items() if op.endswith(("MatMul", "Conv2D")))
    examples = float(np.mean([len(f["padding_mask"]) for f in feeds]))
    gflops = dense_flops(model, tokens, examples) / (matmul_us * 1e3) if matmul_us else None

    print(f"batch {args.batch_size}, {len(feeds)} calls, {tokens:.1f} real tokens a call, {args.dtype}")
    for name, values in wall.items():
        print(f"  {name:<24} wall p50 {np.median(values):7.2f} ms  (rounds: "
              f"{', '.join(f'{v:.2f}' for v in values)})")
    print(f"  kernel time {kernel_us / 1e3:.2f} ms a call; dense matmuls {gflops or 0:.0f} GFLOP/s")
    print(f"  {'op':<28}{'ms/call':>9}{'share':>8}{'count':>7}")
    rows = sorted(ops.items(), key=lambda kv: -kv[1][0])
    for op, (us, count) in rows[:20]:
        print(f"  {op:<28}{us / 1e3:>9.3f}{us / kernel_us:>8.1%}{count:>7.1f}")
    if args.json:
        result = {
            "command": "python benchmarks/profile_inference.py " + " ".join(argv or sys.argv[1:]),
            "load_before": bench_inference.uptime(), "threads": bench_inference.THREADS,
            "batch_size": args.batch_size, "calls": len(feeds), "dtype": args.dtype,
            "real_tokens_per_call": tokens,
            "wall_p50_ms": {name: float(np.median(v)) for name, v in wall.items()},
            "kernel_ms_per_call": kernel_us / 1e3, "dense_matmul_gflops": gflops,
            "ops": {op: {"ms_per_call": us / 1e3, "share": us / kernel_us, "count_per_call": count}
                    for op, (us, count) in rows},
        }
        write_json(args.json, result)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
