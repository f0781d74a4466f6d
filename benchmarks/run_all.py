"""All benchmarks in one go, with small settings: pre-training step, fine-tuning, export, input.

    python benchmarks/run_all.py                # ~30-40 min on 2 cores
    python benchmarks/run_all.py --only pretrain finetune --out runs/bench_all

Runs, one after the other, each in its own process and each interleaving its peers itself:

  pretrain   bench_pretrain.py: our `BertPretrainer` vs keras-hub `BertMaskedLM` vs Hugging Face
             `BertForPreTraining`, step throughput and MFU (small@128 b32, fp32 and bf16; pass
             --pretrain-configs for the full grid)
  finetune   bench_finetune.py: real Rotten Tomatoes snippets, ours vs Hugging Face vs keras-hub
  export     bench_export.py: SavedModel and TFLite sizes, accuracy and single-example latency
  input      bench_input_pipeline.py: pre-training input pipeline, ours vs keras-hub vs Hugging Face

Each script's own table is printed as it runs and kept in OUT/<name>.log; the pre-training
results also go to OUT/pretrain.json.  At the end the ratio lines of every log are printed
together, with the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def commands(args):
    py = sys.executable
    return {
        "pretrain": [py, os.path.join(HERE, "bench_pretrain.py"), "--configs", args.pretrain_configs,
                     "--precisions", "fp32,bf16", "--steps", "3", "--warmup", "2",
                     "--json", os.path.join(args.out, "pretrain.json")],
        "finetune": [py, os.path.join(HERE, "bench_finetune.py"), "--examples", "320", "--repeats", "1"],
        "export": [py, os.path.join(HERE, "bench_export.py"), "--work", os.path.join(args.out, "export"),
                   "--train-examples", "640", "--dev-examples", "300", "--repeats", "10",
                   "--quantize", "none", "dynamic", "--skip-tokenizer-match"],
        "input": [py, os.path.join(HERE, "bench_input_pipeline.py"), "--passes", "2"],
    }


def summary_lines(name, text):
    """The lines of a log worth repeating at the end: tables with ratios and headline numbers."""
    keep = []
    for line in text.splitlines():
        low = line.lower()
        if (line.startswith("|") or "x " in low or low.rstrip().endswith("x") or "seq/s" in low
                or "ms" in low.split() or "matmul peak" in low or "latency" in low or "accuracy" in low):
            keep.append(line)
    return keep[-40:]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=["pretrain", "finetune", "export", "input"],
                        choices=["pretrain", "finetune", "export", "input"])
    parser.add_argument("--out", default="runs/bench_all")
    parser.add_argument("--pretrain-configs", default="small:128:32",
                        help="bench_pretrain.py --configs (the full grid: small:128:32,base:128:16,base:512:4)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    cmds = commands(args)
    status = {}
    for name in args.only:
        print(f"\n=== {name}: {' '.join(cmds[name][1:])}", flush=True)
        start = time.perf_counter()
        log_path = os.path.join(args.out, f"{name}.log")
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmds[name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for line in proc.stdout:
                log.write(line)
                if "warning" not in line.lower():
                    print(line, end="", flush=True)
            proc.wait()
        status[name] = (proc.returncode, time.perf_counter() - start, log_path)
    load = os.getloadavg()
    print(f"\n=== summary (load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
    for name, (code, seconds, log_path) in status.items():
        print(f"\n--- {name}: exit {code}, {seconds / 60:.1f} min, log {log_path}")
        with open(log_path) as f:
            for line in summary_lines(name, f.read()):
                print(line)
    return max((code for code, _, _ in status.values()), default=0)


if __name__ == "__main__":
    sys.exit(main())
