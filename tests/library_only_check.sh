#!/usr/bin/env bash
# The library alone, as a user installs it: a fresh venv with `pip install .` (no extras, none of
# the test references) runs the CLI's main paths, and no library module imports a package that
# only the tests install (tests/check_library_imports.py, which also checks that every import is
# a declared dependency).
#
#   bash tests/library_only_check.sh                          # what `pip install .` resolves
#   TF_SPEC='tensorflow==2.20.*' bash tests/library_only_check.sh
#
# Environment: PY (python3), LIBRARY_VENV (.venv-library, rebuilt each run), TF_SPEC (extra pip
# requirement, empty by default). Exits non-zero at the first failing step.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PY:-python3}
VENV=${LIBRARY_VENV:-.venv-library}
case $VENV in /*) ;; *) VENV=$ROOT/$VENV ;; esac
BIN=$VENV/bin

step() { printf '\n== library-only: %s\n' "$*"; }

step "fresh venv $VENV: pip install . ${TF_SPEC:-}"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$BIN/pip" install -q --upgrade pip
# shellcheck disable=SC2086  # TF_SPEC may hold several requirements
"$BIN/pip" install -q . ${TF_SPEC:-}
"$BIN/pip" check
"$BIN/python" - <<'EOF'
import importlib.metadata as md
print("installed:", ", ".join(f"{d} {md.version(d)}" for d in
      ("tensorflow", "tensorflow-text", "keras", "tensorboard", "ai-edge-litert")))
for absent in ("official", "transformers", "torch", "tf_keras", "keras_hub"):
    try:
        __import__(absent)
    except ImportError:
        continue
    raise SystemExit(f"{absent} is installed by `pip install .`: it must not be a dependency")
EOF

step "every import in bert_keras/ is stdlib or a declared dependency"
imports_ok=true
"$BIN/python" tests/check_library_imports.py || imports_ok=false  # reported at the end; the CLI runs on

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# The console script of the venv runs the installed copy (not this folder's bert_keras/).
CLI=$BIN/bert-keras
export TF_CPP_MIN_LOG_LEVEL=2

step "bert-keras demo --fast"
"$CLI" demo --fast --out "$WORK/demo"
BEST=$("$BIN/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["checkpoint"])' "$WORK/demo/summary.json")
test -f "$WORK/demo/training_curve.png"

step "bert-keras pretrain (BERT-tiny, a few steps of both phases on the Wikipedia sample)"
"$CLI" pretrain --config training/pretrain_mini_wiki.yaml --model-dir "$WORK/pretrain" \
    --phase1-steps 4 --phase2-steps 2 --phase1-seq-len 32 --phase1-max-predictions 5 \
    --phase2-seq-len 64 --phase2-max-predictions 8 --batch-size 8 --warmup-steps 1 \
    --log-every 2 --checkpoint-every 2 --eval-batches 1 --no-progress
test -f "$WORK/pretrain/final/bert_keras.json"
test -n "$(ls -A "$WORK/pretrain/tensorboard")"  # tf.summary wrote events: tensorboard is installed

step "bert-keras export (SavedModel and TFLite) and predict on each"
"$CLI" export --model-dir "$BEST" --out "$WORK/serving/1"
"$CLI" export --model-dir "$BEST" --out "$WORK/tflite" --format tflite
i=0
for model in "$BEST" "$WORK/serving/1" "$WORK/tflite/model_text.tflite"; do
    i=$((i + 1))
    "$CLI" predict --model "$model" "a gorgeous, witty and deeply moving film." "flat and dull." \
        > "$WORK/predictions$i.jsonl"
done
# The three forms of one model agree (the bound of tests/test_export.py's predict test).
"$BIN/python" - "$WORK"/predictions{1,2,3}.jsonl <<'EOF'
import json, sys
runs = [[json.loads(line) for line in open(path, encoding="utf-8")] for path in sys.argv[1:]]
for name, rows in zip(("folder", "SavedModel", "TFLite"), runs):
    assert len(rows) == 2, rows
    print(name, [(r["label"], r["probabilities"]) for r in rows])
probs = [[p for r in rows for p in r["probabilities"].values()] for rows in runs]
worst = max(abs(a - b) for other in probs[1:] for a, b in zip(probs[0], other))
assert all(abs(sum(r["probabilities"].values()) - 1) < 1e-4 for rows in runs for r in rows)
assert all([r["label"] for r in rows] == [r["label"] for r in runs[0]] for rows in runs), "labels differ"
assert worst <= 1e-4, f"exports disagree with the folder by {worst}"
print(f"predict: folder, SavedModel and TFLite agree (max |probability difference| {worst:.1e})")
EOF

if [ "$imports_ok" != true ]; then
    step "FAILED: bert_keras/ imports a test-only or undeclared package (listed above)"
    exit 1
fi
step "passed"
