"""What each fast kernel of the plan buys: a step benchmark run with the plan as chosen, and once
per operation with that one operation switched back to its plain implementation.

    python benchmarks/bench_kernel_variants.py --rounds 5 --key sequences_per_second \\
        -- benchmarks/bench_pretrain_step.py --seq-len 128 --batch-size 16 --mixed-precision bf16
    python benchmarks/bench_kernel_variants.py --rounds 5 --key ms_per_batch --inference \\
        -- benchmarks/bench_inference_step.py --mixed-precision bf16

Each setting runs in a fresh process: the benchmark script as it is ("plan"), and with one field
of every `KernelPlan` the layers receive replaced (``gelu=plain``: the plain GELU wherever the
plan chose another).  The replacement is made by wrapping `bert_keras.layers.plan.kernel_plan`
in the measuring process only; the library has no such switch.  A setting whose replacement
changed no plan the layers read is reported as "not chosen here".  Every round runs every
setting once, the order rotating from round to round (load drift hits each alike).  Prints the
machine line, each round, then per setting the median, its ratio to the plan's median and the
rounds in which the plan was ahead; ``--json`` writes them.
"""

import argparse
import dataclasses
import json
import os
import runpy
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from bench_checkouts import json_value  # noqa: E402
from machine import describe  # noqa: E402

# Per operation, its plain implementation (the tests' reference); see docs/design.md, "Kernel plan".
TRAINING = {"attention": "plain", "layer_norm": "keras", "add_norm": "plain", "embeddings": "plain",
            "gelu": "plain", "dropout": "keras", "loss": "keras", "mlm_logits": "matmul"}
INFERENCE = {"softmax": "float32", "layer_norm": "keras", "gelu": "plain", "ffn": "plain", "dense": "keras",
             "packing": False}
CHANGED = "kernel variants replaced: "


def _child(override, command):
    """Runs ``command`` (a script and its arguments) here with ``override`` applied to every plan."""
    from bert_keras.layers import plan

    field, value = override.split("=", 1)
    value = {"False": False, "True": True}.get(value, value)
    chosen = plan.kernel_plan
    changed = set()

    def replaced(*args, **kwargs):
        result = chosen(*args, **kwargs)
        if getattr(result, field) != value:
            changed.add(f"{field}: {getattr(result, field)} -> {value}")
            result = dataclasses.replace(result, **{field: value})
        return result

    plan.kernel_plan = replaced
    sys.argv = list(command)
    try:
        runpy.run_path(command[0], run_name="__main__")
    except SystemExit as stop:
        if stop.code:
            raise
    finally:
        print(CHANGED + json.dumps(sorted(changed)), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--key", required=True, help="the field of the command's JSON line to compare")
    parser.add_argument("--inference", action="store_true", help="the inference operations (default: training)")
    parser.add_argument("--only", help="comma-separated operations to switch (default: every one of the step)")
    parser.add_argument("--json", help="write the rounds and medians here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- SCRIPT ARGS...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    if args.child:
        return _child(args.child, command)
    table = INFERENCE if args.inference else TRAINING
    fields = args.only.split(",") if args.only else list(table)
    settings = {"plan": None, **{f"{f}={table[f]}": f"{f}={table[f]}" for f in fields}}
    print(describe(), flush=True)
    values = {name: [] for name in settings}
    notes = {}
    names = list(settings)
    for r in range(args.rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            child = [] if settings[name] is None else [os.path.abspath(__file__), "--key", args.key,
                                                       "--child", settings[name], "--"]
            proc = subprocess.run([sys.executable, *child, *command], cwd=REPO, capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"{name}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
            values[name].append(json_value(proc.stdout, args.key))
            for line in proc.stdout.splitlines():
                if line.startswith(CHANGED):
                    notes[name] = json.loads(line[len(CHANGED):])
        print(f"round {r + 1}: " + ", ".join(f"{n} {values[n][-1]:.2f}" for n in names), flush=True)
    medians = {name: statistics.median(v) for name, v in values.items()}
    faster_is_higher = not args.key.startswith("ms")
    summary = {}
    for name in names:
        ahead = sum((p > v) == faster_is_higher and p != v for p, v in zip(values["plan"], values[name]))
        summary[name] = {"median": medians[name], "over_plan": medians[name] / medians["plan"],
                         "plan_ahead_in": f"{ahead} of {args.rounds}" if name != "plan" else "",
                         "replaced": notes.get(name, [])}
        chosen = "" if name == "plan" or notes.get(name) else "  (not chosen here)"
        print(f"{name:22s} {medians[name]:9.2f}  {medians[name] / medians['plan']:.3f} of the plan"
              f"{'  plan ahead in ' + summary[name]['plan_ahead_in'] if name != 'plan' else ''}{chosen}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": describe(), "command": command, "key": args.key, "rounds": values,
                       "summary": summary}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
