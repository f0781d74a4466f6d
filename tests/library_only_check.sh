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
for model in "$WORK/serving/1" "$WORK/tflite/model_text.tflite" "$BEST"; do
    "$CLI" predict --model "$model" "a gorgeous, witty and deeply moving film." "flat and dull." \
        > "$WORK/predictions.jsonl"
    "$BIN/python" - "$WORK/predictions.jsonl" "$model" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
assert len(rows) == 2 and all(abs(sum(r["probabilities"]) - 1) < 1e-4 for r in rows), rows
print(sys.argv[2].rsplit("/", 2)[-2:], [r["label"] for r in rows])
EOF
done

if [ "$imports_ok" != true ]; then
    step "FAILED: bert_keras/ imports a package that is not a declared dependency (listed above)"
    exit 1
fi
step "passed"
