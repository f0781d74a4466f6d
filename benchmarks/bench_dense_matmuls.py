"""The encoder's dense matmuls alone, at one sentence's length: TensorFlow vs ONNX Runtime vs LiteRT.

A batch-1 call of a BERT encoder spends most of its time in the dense layers (Q/K/V, attention
output, FFN in and out: four matmuls a layer).  This script times exactly those matmuls and
nothing else, float32, in each runtime that serves bert-keras models or its peers, so a batch-1
latency gap can be split into "the matrix library" and "everything around it":

  * tf-variables  a `tf.function` reading the weights from `tf.Variable`s, as a Keras model and
                  a SavedModel do (TensorFlow's oneDNN MatMul kernels);
  * tf-constants  the same with the weights frozen into the graph as constants (oneDNN then
                  caches them in its own blocked layout);
  * tf-xla        tf-variables compiled by XLA (``jit_compile=True``);
  * tf-xla-xnnpack  tf-xla with XLA's XNNPACK dots (``XLA_FLAGS=--xla_cpu_use_xnnpack=true``);
  * tf-eigen      tf-variables on TensorFlow's Eigen kernels (``TF_ENABLE_ONEDNN_OPTS=0``);
  * onnxruntime   the same graph as ONNX MatMul nodes (ONNX Runtime's MLAS);
  * litert        the constants function converted to a .tflite file (FULLY_CONNECTED, XNNPACK).

Per layer: x @ W_qkv, x @ W_o, and the FFN (x @ W_in) @ W_out, whose output feeds the next layer.
Random float32 weights of the model's shapes (speed does not depend on the values), x of
[--tokens, hidden].  Every runner has its own process with 2 threads (TensorFlow intra-op 2 /
inter-op 1, ONNX Runtime intra-op 2 / inter-op 1, LiteRT 2), the runners take turns round by round;
per round the p50 over --calls calls after 20 warm-up calls; the table is the median of the rounds.

    python benchmarks/bench_dense_matmuls.py                     # all-MiniLM-L6-v2's shapes, ~3 min
    python benchmarks/bench_dense_matmuls.py --hidden 768 --intermediate 3072 --layers 12
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_inference  # noqa: E402  (threads, load)

RUNNERS = ("tf-variables", "tf-constants", "tf-xla", "tf-xla-xnnpack", "tf-eigen", "onnxruntime", "litert")


def weights(args):
    """[[W_qkv, W_o, W_in, W_out] per layer], float32, seeded."""
    rng = np.random.default_rng(0)
    h, i = args.hidden, args.intermediate
    shapes = [(h, 3 * h), (h, h), (h, i), (i, h)]
    return [[(rng.standard_normal(s) * 0.05).astype(np.float32) for s in shapes] for _ in range(args.layers)]


def flops(args):
    h, i = args.hidden, args.intermediate
    return 2 * args.tokens * args.layers * (3 * h * h + h * h + 2 * h * i)


def tf_function(layers, constants=False, xla=False):
    import tensorflow as tf

    held = [[(tf.constant if constants else tf.Variable)(w) for w in layer] for layer in layers]

    @tf.function(jit_compile=xla)
    def call(x):
        outs = []
        for qkv, o, w_in, w_out in held:
            outs += [tf.matmul(x, qkv), tf.matmul(x, o)]
            x = tf.matmul(tf.matmul(x, w_in), w_out)
        return outs + [x]

    call.held = held  # the variables must outlive the trace
    return call


def load_runner(name, layers, x):
    """fn() -> outputs, one call of the matmuls."""
    if name.startswith("tf-"):
        bench_inference.pin_tensorflow_threads()
        import tensorflow as tf

        call = tf_function(layers, constants=name == "tf-constants", xla=name.startswith("tf-xla"))
        xt = tf.constant(x)
        return lambda: call(xt)
    if name == "onnxruntime":
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper

        nodes, inits, outs, cur = [], [], [], "x"
        for n, layer in enumerate(layers):
            names = [f"l{n}_{k}" for k in ("qkv", "o", "in", "out")]
            inits += [numpy_helper.from_array(w, nm) for w, nm in zip(layer, names)]
            nodes += [helper.make_node("MatMul", [cur, names[0]], [f"qkv{n}"]),
                      helper.make_node("MatMul", [cur, names[1]], [f"o{n}"]),
                      helper.make_node("MatMul", [cur, names[2]], [f"h{n}"]),
                      helper.make_node("MatMul", [f"h{n}", names[3]], [f"x{n}"])]
            outs += [f"qkv{n}", f"o{n}"]
            cur = f"x{n}"
        graph = helper.make_graph(
            nodes, "dense_matmuls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs + [cur]], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = bench_inference.THREADS, 1
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return lambda: sess.run(None, {"x": x})
    if name == "litert":
        import tensorflow as tf
        from ai_edge_litert.interpreter import Interpreter

        call = tf_function(layers, constants=True)
        concrete = call.get_concrete_function(tf.TensorSpec(x.shape, tf.float32))
        flat = tf.lite.TFLiteConverter.from_concrete_functions([concrete], call).convert()
        interp = Interpreter(model_content=flat, num_threads=bench_inference.THREADS)
        interp.allocate_tensors()
        index = interp.get_input_details()[0]["index"]

        def run():
            interp.set_tensor(index, x)
            interp.invoke()
            return [interp.get_tensor(o["index"]) for o in interp.get_output_details()]
        return run
    raise ValueError(f"unknown runner {name!r}; expected one of {', '.join(RUNNERS)}")


def worker(args):
    """One round of one runner: prints {"checksum", "p50_ms", "p99_ms"}."""
    bench_inference.pin_threads()
    if args.worker == "tf-eigen":  # read once, when TensorFlow loads
        os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
    if args.worker == "tf-xla-xnnpack":
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_use_xnnpack=true").strip()
    x = np.random.default_rng(1).standard_normal((args.tokens, args.hidden)).astype(np.float32)
    run = load_runner(args.worker, weights(args), x)
    # Order-free checksum of the outputs: the parent checks every runner computed the same thing.
    checksum = float(sum(np.abs(np.asarray(o, np.float64)).sum() for o in run()))
    for _ in range(20):
        run()
    times = []
    for _ in range(args.calls):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    print(json.dumps({"checksum": checksum, "p50_ms": 1e3 * float(np.percentile(times, 50)),
                      "p99_ms": 1e3 * float(np.percentile(times, 99))}))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=27,
                   help="rows of x: a sentence's tokens (27: the dev snippets' median length)")
    p.add_argument("--hidden", type=int, default=384)
    p.add_argument("--intermediate", type=int, default=1536)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runners", nargs="+", default=list(RUNNERS), choices=RUNNERS)
    p.add_argument("--json", help="write the result here (default: print only)")
    p.add_argument("--worker", choices=RUNNERS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)

    load_before = bench_inference.uptime()
    shape_args = [f"--{k}={getattr(args, k)}" for k in ("tokens", "hidden", "intermediate", "layers", "calls")]
    rounds = {name: [] for name in args.runners}
    for r in range(args.rounds):
        for name in args.runners:
            proc = subprocess.run([sys.executable, __file__, "--worker", name] + shape_args,
                                  capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
            rounds[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1} {name:14s} p50 {rounds[name][-1]['p50_ms']:7.2f} ms", flush=True)

    sums = {name: rs[0]["checksum"] for name, rs in rounds.items()}
    first = next(iter(sums.values()))
    if any(abs(v - first) > 1e-4 * abs(first) for v in sums.values()):
        raise SystemExit(f"the runners' outputs differ (sums of |outputs|): {sums}")
    total = flops(args)
    results = {}
    print(f"\n{4 * args.layers} dense matmuls, {args.tokens} tokens, {total / 1e6:.0f} MFLOP a call")
    print(f"{'runner':14s} {'p50 ms':>8s} {'GFLOP/s':>8s} {'vs onnxruntime':>15s}")
    ref = np.median([x["p50_ms"] for x in rounds["onnxruntime"]]) if "onnxruntime" in rounds else None
    for name, rs in rounds.items():
        p50 = float(np.median([x["p50_ms"] for x in rs]))
        results[name] = {"p50_ms": p50, "gflops": total / p50 / 1e6, "rounds_p50_ms": [x["p50_ms"] for x in rs],
                         "p99_ms": float(np.median([x["p99_ms"] for x in rs]))}
        ratio = f"{p50 / ref:14.2f}x" if ref else ""
        print(f"{name:14s} {p50:8.2f} {results[name]['gflops']:8.1f} {ratio:>15s}")
    load_after = bench_inference.uptime()
    print(f"load before: {load_before}\nload after:  {load_after}")
    if args.json:
        command = " ".join(["python benchmarks/bench_dense_matmuls.py"] + (sys.argv[1:] if argv is None else argv))
        out = {"command": command, "tokens": args.tokens, "hidden": args.hidden, "intermediate": args.intermediate,
               "layers": args.layers, "calls": args.calls, "rounds": args.rounds,
               "threads": bench_inference.THREADS, "mflop_per_call": total / 1e6, "runners": results,
               "load_before": load_before, "load_after": load_after}
        from bert_keras.writing import write_json

        write_json(args.json, out)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    sys.exit(main())
