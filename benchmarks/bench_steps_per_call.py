"""What ``steps_per_call`` buys the pre-training runner on the backend at hand (JAX by default).

    KERAS_BACKEND=jax python benchmarks/bench_steps_per_call.py --rounds 5 --calls 1,8
    KERAS_BACKEND=jax python benchmarks/bench_steps_per_call.py --preset mini --seq-len 128 --batch-size 32

Each run is `bert_keras.training.pretrain.pretrain` itself in a fresh process, on the embedded
Wikipedia sample with the real uncased vocabulary, one phase; its rate is the median
``examples_per_second`` of ``metrics.jsonl`` after the first window (which holds the compile).
Every round runs every ``steps_per_call`` once, the order rotating from round to round.  Prints
the machine line, each round, then per setting the median over rounds, its ratio to the first
setting's median and the rounds it was ahead; ``--json`` writes them.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from machine import describe  # noqa: E402

RUN = """
import json, statistics, sys
from bert_keras.training.pretrain import PretrainConfig, pretrain, read_metrics
values = json.loads(sys.argv[1])
pretrain(PretrainConfig.from_dict(values))
records = read_metrics(values["model_dir"] + "/metrics.jsonl")[0][1:]
print("rate:", statistics.median(r["examples_per_second"] for r in records))
"""


def run_once(values):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", RUN, json.dumps(values)], capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return float(proc.stdout.rsplit("rate:", 1)[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", default="1,8", help="steps_per_call values, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=64, help="optimiser steps a run (windows of 8)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    from bert_keras import samples

    calls = [int(c) for c in args.calls.split(",")]
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    print(describe())
    print(f"backend {backend}, {args.preset} @{args.seq_len}, batch {args.batch_size}, {args.steps} steps a run")
    wiki, vocab = str(samples.fetch("wiki")), str(samples.fetch("minilm") / "vocab.txt")
    rates = {c: [] for c in calls}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = calls[r % len(calls):] + calls[:r % len(calls)]
            for c in order:
                values = dict(preset=args.preset, vocab=vocab, train_files=wiki, model_dir=f"{tmp}/r{r}-c{c}",
                              phase1_steps=args.steps, phase2_steps=0, phase1_seq_len=args.seq_len,
                              phase1_max_predictions=max(1, round(args.seq_len * 0.15)),
                              batch_size=args.batch_size, log_every=8, checkpoint_every=10 ** 6, progress=False,
                              steps_per_call=c, seed=0)
                rates[c].append(run_once(values))
            print(f"round {r + 1}: " + ", ".join(f"steps_per_call {c}: {rates[c][-1]:.2f} seq/s" for c in calls))
    first = statistics.median(rates[calls[0]])
    results = {}
    for c in calls:
        median = statistics.median(rates[c])
        ahead = sum(a > b for a, b in zip(rates[c], rates[calls[0]]))
        results[c] = {"median": median, "rounds": rates[c], "ratio": median / first, "ahead": ahead}
        print(f"steps_per_call {c}: median {median:.2f} seq/s, {median / first:.3f}x of steps_per_call {calls[0]}"
              + (f", ahead in {ahead}/{args.rounds}" if c != calls[0] else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": describe(), "backend": backend, "preset": args.preset, "seq_len": args.seq_len,
                       "batch_size": args.batch_size, "steps": args.steps, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
