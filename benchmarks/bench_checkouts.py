"""Two checkouts of this repository, side by side: one benchmark command run in each, alternately.

    python benchmarks/bench_checkouts.py --before d8f112e --after HEAD --rounds 5 --key sequences_per_second \\
        -- benchmarks/bench_pretrain_step.py --seq-len 128 --batch-size 16 --mixed-precision bf16

Each revision is checked out into a temporary `git worktree`; every round runs the command once
in each (in a fresh process, the order alternating from round to round, so load drift hits both
alike), with this interpreter and the checkout first on ``PYTHONPATH``; a script the command
names is taken from this tree, so both checkouts run the same benchmark.  It prints a JSON
line; ``--key`` names the number compared.  Prints the machine line, each round's pair and the
medians, and their ratio; ``--json`` writes them.  The worktrees are removed at the end.
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


def json_value(output, key):
    """The number ``key`` of the last JSON line of ``output`` that has it (a benchmark's result line)."""
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if key in record:
                return float(record[key])
    raise SystemExit(f"no JSON line with {key!r} in the output:\n{output[-2000:]}")


def _environment(tree):
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH")) if p)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="a revision (commit, tag, branch)")
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--key", required=True, help="the field of the command's JSON line to compare")
    parser.add_argument("--json", help="write the rounds and medians here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- SCRIPT ARGS... (a path inside the checkout)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    shown = list(command)  # as given, for the record
    if command[0].endswith(".py") and os.path.exists(os.path.join(REPO, command[0])):
        command[0] = os.path.join(REPO, command[0])  # this tree's script, the checkout's library
    print(describe(), flush=True)
    with tempfile.TemporaryDirectory(prefix="checkouts-") as tmp:
        trees = {}
        for label, revision in (("before", args.before), ("after", args.after)):
            trees[label] = os.path.join(tmp, label)
            subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", trees[label], revision], check=True,
                           capture_output=True)
        try:
            for label, tree in trees.items():  # the library each one imports is its own
                found = subprocess.run([sys.executable, "-c", "import bert_keras; print(bert_keras.__file__)"],
                                       cwd=tree, env=_environment(tree), capture_output=True, text=True).stdout.strip()
                if not found.startswith(tree):
                    raise SystemExit(f"{label}: imports bert_keras from {found}, not from its checkout")
            values = {"before": [], "after": []}
            for r in range(args.rounds):
                order = ("before", "after") if r % 2 == 0 else ("after", "before")
                for label in order:
                    proc = subprocess.run([sys.executable, *command], cwd=trees[label],
                                          env=_environment(trees[label]), capture_output=True, text=True)
                    if proc.returncode:
                        raise SystemExit(f"{label}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
                    values[label].append(json_value(proc.stdout, args.key))
                print(f"round {r + 1}: before {values['before'][-1]:.2f}, after {values['after'][-1]:.2f}", flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", tree], capture_output=True)
    medians = {k: statistics.median(v) for k, v in values.items()}
    print(f"median {args.key}: before {medians['before']:.2f}, after {medians['after']:.2f}, "
          f"after/before {medians['after'] / medians['before']:.3f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": describe(), "command": shown, "key": args.key, "before": args.before,
                       "after": args.after, "rounds": values, "medians": medians}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
