"""Latency of one compiled inference call of a classifier on a batch of mixed lengths.

    python benchmarks/bench_inference_step.py --preset mini --batch-size 32 --mixed-precision bf16

Random weights and token ids (lengths 20..seq_len, padded to seq_len), `inference_function`
of a `BertClassifier`, two warm-up calls, then the median of --calls; prints one JSON line.
"""

import argparse
import json
import statistics
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--vocab-size", type=int, default=30522)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--mixed-precision", default="none", choices=["none", "bf16"])
    args = parser.parse_args(argv)

    import keras
    import numpy as np

    import bert_keras as bk
    from bert_keras.models.inference import inference_function

    if args.mixed_precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    keras.utils.set_random_seed(0)
    model = bk.BertClassifier(bk.BertEncoder(bk.BertConfig.preset(args.preset, vocab_size=args.vocab_size)),
                              num_classes=2)
    rng = np.random.default_rng(0)
    ids = np.zeros((args.batch_size, args.seq_len), np.int32)
    mask = np.zeros_like(ids)
    for i, n in enumerate(rng.integers(20, args.seq_len + 1, args.batch_size)):
        ids[i, :n], mask[i, :n] = rng.integers(5, args.vocab_size, n), 1
    x = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}
    call = inference_function(model)

    def run():
        out = call(x)
        return [keras.ops.convert_to_numpy(v) for v in (out.values() if isinstance(out, dict) else [out])]

    run(), run()
    times = []
    for _ in range(args.calls):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    print(json.dumps({"preset": args.preset, "batch_size": args.batch_size, "seq_len": args.seq_len,
                      "mixed_precision": args.mixed_precision, "ms_per_batch": 1000 * statistics.median(times)}))


if __name__ == "__main__":
    main()
