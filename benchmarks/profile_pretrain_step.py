"""Where a pre-training step's time goes: TensorFlow profiler time per op type, and how close the
step's matmuls come to the machine's matmul peak.

The step is bench_pretrain.py's ``ours`` (what `bert-keras pretrain` runs on TensorFlow: MLM + NSP,
global-norm clip 1.0, AdamW) on its fixed random batch:

  * wall time per step: median over --steps, after --warmup untimed steps;
  * a profiled pass of --profile-steps steps: each TensorFlow op type's kernel time per step and its
    share of the step's wall time (the XLA kernels, the fused element-wise stages, run beside them
    and are not listed);
  * the matmul rate: the model FLOPs (bench_pretrain.py's count, all of them matmuls) over the
    matmul kernels' time, against the bf16 / float32 matmul peak measured in the same process;
  * the ceiling: the step if everything outside the matmuls took no time.

Inter-op parallelism is 1 so that kernel times add up to the wall time (with 2 inter-op threads two
kernels share the cores and each one's time counts the other's; the step's throughput is the same
within the spread: medians of 5 interleaved rounds 22.05 seq/s with TensorFlow's default, 21.5 with
1, small@128 b32 bf16 on an AMD EPYC with AVX512-BF16).

    python benchmarks/profile_pretrain_step.py                        # small@128 b32 bf16, ~2 min
    python benchmarks/profile_pretrain_step.py --preset base --batch 16 --json out.json
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import bench_pretrain  # noqa: E402  (the step, its batch and its FLOP count)
import machine  # noqa: E402
from profile_inference import op_times  # noqa: E402

MATMULS = ("_MklMatMul", "_MklBatchMatMulV2", "_MklNativeFusedMatMul", "MatMul", "BatchMatMulV2")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="small", choices=sorted(bench_pretrain.PRESETS))
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--steps", type=int, default=6, help="timed steps")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--top", type=int, default=15, help="op types listed")
    p.add_argument("--json", default=None, help="write the result here")
    args = p.parse_args(argv)

    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(1)
    peak = bench_pretrain.run_peak()[args.precision]
    step = bench_pretrain.ours_step(args.preset, args.seq_len, args.batch, args.precision)
    wall_ms = statistics.median(bench_pretrain._timed(step, args.steps, args.warmup)) * 1e3
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(args.profile_steps):
            step()
        tf.profiler.experimental.stop()
        ops = op_times(logdir, args.profile_steps)

    flops = bench_pretrain.model_flops_per_sequence(args.preset, args.seq_len) * args.batch
    matmul_ms = sum(ops[op][0] for op in MATMULS if op in ops) / 1e3
    kernel_ms = sum(us for us, _ in ops.values()) / 1e3
    result = {
        "machine": machine.describe(), "preset": args.preset, "seq_len": args.seq_len, "batch": args.batch,
        "precision": args.precision, "wall_ms_per_step": wall_ms, "sequences_per_second": args.batch / wall_ms * 1e3,
        "peak_gflops": peak["gflops"], "peak_source": peak["source"], "model_gflop_per_step": flops / 1e9,
        "matmul_ms_per_step": matmul_ms, "matmul_gflops": flops / matmul_ms / 1e6,
        "kernel_ms_per_step": kernel_ms,
        "ops": {op: {"ms_per_step": us / 1e3, "per_step": n} for op, (us, n) in
                sorted(ops.items(), key=lambda item: -item[1][0]) if us >= 50}}  # 0.05 ms and up
    print(result["machine"])
    print(f"{args.preset}@{args.seq_len} b{args.batch} {args.precision}: {wall_ms:.0f} ms a step "
          f"({result['sequences_per_second']:.2f} seq/s)")
    print(f"{'op type':32s} {'ms/step':>8s} {'of step':>8s} {'kernels':>8s}")
    for op, row in list(result["ops"].items())[:args.top]:
        print(f"{op:32s} {row['ms_per_step']:8.1f} {row['ms_per_step'] / wall_ms:8.1%} {row['per_step']:8.0f}")
    print(f"matmuls: {matmul_ms:.0f} ms, {matmul_ms / wall_ms:.1%} of the step, at {result['matmul_gflops']:.0f} GFLOP/s "
          f"= {result['matmul_gflops'] / peak['gflops']:.1%} of the {peak['gflops']:.0f} GFLOP/s {args.precision} peak "
          f"({peak['source']}); everything else {wall_ms - matmul_ms:.0f} ms: the other TensorFlow kernels "
          f"{kernel_ms - matmul_ms:.0f}, the XLA kernels (which run beside them) and the executor the rest")
    print(f"with nothing but the matmuls the step would run {args.batch / matmul_ms * 1e3:.2f} seq/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
