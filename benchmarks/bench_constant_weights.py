"""Inference with the weights as graph constants on a larger model: `inference_function(model)`
against `inference_function(model, constant_weights=True)`, speed, memory and start-up.

No BERT-base checkpoint installs offline, so the model is a `BertClassifier` on
`BertConfig.preset(--preset)` whose initial weights each get Gaussian noise (std --noise):
trained weights have non-zero biases and LayerNorm scales away from one, and freshly initialised
ones would let TensorFlow's graph simplification remove those ops from the constant graph
(``--noise 0`` shows what that costs).  Inputs: --batches batches of 32 random token ids at
random lengths in [--min-len, --max-len], each batch padded to its longest member; both
functions on the real tokens only (the classifier's default), 2 TensorFlow threads.

Measured in one process, in this order:
  * resident memory (VmRSS after garbage collection and malloc_trim) after building the model,
    after the variable-reading function's first pass, after building the constant function and
    after its first pass; the process's peak;
  * seconds to build the constant function and for its first pass over the batches;
  * the p50 of a call over the batches, the two functions interleaved for --rounds rounds;
  * the largest difference between the two functions' logits.

    python benchmarks/bench_constant_weights.py                       # base, bf16, ~3 min
    python benchmarks/bench_constant_weights.py --preset small --dtype float32 --rounds 3

Results: --json (default: print only).
"""

import argparse
import ctypes
import gc
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_inference  # noqa: E402  (threads)
import machine  # noqa: E402
from profile_inference import p50_ms  # noqa: E402


def resident_mb():
    """VmRSS in MB after a garbage collection and, with glibc, malloc_trim (freed heap returned)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def random_batches(n, vocab_size, min_len, max_len, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        longest = int(rng.integers(min_len, max_len + 1))
        lengths = rng.integers(max(2, longest // 3), longest + 1, 32)
        lengths[0] = longest
        mask = (np.arange(longest)[None] < lengths[:, None]).astype("int32")
        ids = rng.integers(1000, vocab_size, mask.shape).astype("int32") * mask
        out.append({"token_ids": ids, "segment_ids": np.zeros_like(mask), "padding_mask": mask})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="base")
    p.add_argument("--dtype", default="mixed_bfloat16", choices=("float32", "mixed_bfloat16"))
    p.add_argument("--noise", type=float, default=0.02, help="std of the noise added to every initial weight")
    p.add_argument("--batches", type=int, default=6)
    p.add_argument("--min-len", type=int, default=40)
    p.add_argument("--max-len", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", help="write the result here")
    args = p.parse_args(argv)
    bench_inference.pin_threads()
    bench_inference.pin_tensorflow_threads()
    import keras

    import bert_keras as bk
    from bert_keras.models import inference_function
    from bert_keras.writing import write_json

    print(machine.describe())
    load_before = bench_inference.uptime()
    keras.utils.set_random_seed(0)
    config = bk.BertConfig.preset(args.preset)
    model = bk.BertClassifier(bk.BertEncoder(config, dtype=None if args.dtype == "float32" else args.dtype),
                              num_classes=2)
    rng = np.random.default_rng(0)
    model.set_weights([w + args.noise * rng.standard_normal(w.shape).astype(w.dtype) for w in model.get_weights()])
    batches = random_batches(args.batches, config.vocab_size, args.min_len, args.max_len)
    memory = {"model": resident_mb()}
    live = inference_function(model)
    want = [np.asarray(live(b)) for b in batches]
    memory["variables_function"] = resident_mb()
    start = time.perf_counter()
    constant = inference_function(model, constant_weights=True)
    build_s = time.perf_counter() - start
    memory["constant_function_built"] = resident_mb()
    start = time.perf_counter()
    got = [np.asarray(constant(b)) for b in batches]
    first_s = time.perf_counter() - start
    memory["constant_function_called"] = resident_mb()
    diff = max(float(np.abs(a - b).max()) for a, b in zip(got, want))
    rounds = {"variables": [], "constants": []}
    for _ in range(args.rounds):  # interleaved, so load drift hits both
        rounds["variables"].append(p50_ms(live, batches))
        rounds["constants"].append(p50_ms(constant, batches))
    median = {k: float(np.median(v)) for k, v in rounds.items()}
    weights_mb = sum(np.prod(w.shape) * 4 for w in model.weights) / 2**20

    print(f"{args.preset}, {args.dtype}, {model.count_params():,} parameters ({weights_mb:.0f} MB in float32); "
          f"{args.batches} batches of 32, lengths {args.min_len}-{args.max_len}")
    for name, values in rounds.items():
        print(f"  {name:<10} p50 {median[name]:8.1f} ms a batch  (rounds: {', '.join(f'{v:.1f}' for v in values)})")
    print(f"  speed-up {median['variables'] / median['constants']:.2f}x; logits differ by {diff:.1e}")
    print(f"  constant function: built in {build_s:.1f} s, first pass {first_s:.1f} s")
    print("  resident MB: " + ", ".join(f"{k} {v:.0f}" for k, v in memory.items()) + f"; peak {peak_mb():.0f}")
    if args.json:
        write_json(args.json, {
            "command": "python benchmarks/bench_constant_weights.py " + " ".join(argv or sys.argv[1:]),
            "machine": machine.cpu(), "load_before": load_before, "threads": bench_inference.THREADS,
            "preset": args.preset, "dtype": args.dtype, "noise": args.noise, "parameters": model.count_params(),
            "batches": args.batches, "lengths": [args.min_len, args.max_len],
            "ms_per_batch": median, "ms_per_batch_rounds": rounds,
            "speedup": median["variables"] / median["constants"], "max_logit_difference": diff,
            "build_seconds": build_s, "first_pass_seconds": first_s,
            "resident_mb": memory, "peak_mb": peak_mb(),
        })
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
