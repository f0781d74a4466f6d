# The two set-up commands of the README: `make demo` (main job) and `make test`.
# CI (.ci/run) runs `make test`, `make test-tf221` and `make check-library-only`;
# docs/install.md has the supported versions.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# TensorFlow 2.21 stack for the second CI leg (tf-models-official cannot install there)
VENV_TF221 ?= .venv-tf221
BIN_TF221 := $(VENV_TF221)/bin
PYTEST_ARGS ?= -q

.PHONY: install install-tf221 demo test test-tf221 test-jax test-torch check-library-only clean

# TensorFlow 2.20 with every reference, Google's tf-models-official included.
$(VENV)/installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e ".[test,tf-models]" "tensorflow==2.20.*"
	touch $@

# What `bert-keras demo` needs: the library and TensorFlow 2.20, none of the test references.
$(VENV)/demo-installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e . "tensorflow==2.20.*"
	touch $@

$(BIN_TF221)/bert-keras: pyproject.toml
	$(PY) -m venv $(VENV_TF221)
	$(BIN_TF221)/pip install --upgrade pip
	$(BIN_TF221)/pip install -e ".[test]" "tensorflow==2.21.*" "tensorflow-text==2.21.*"
	touch $@

install: $(VENV)/installed

install-tf221: $(BIN_TF221)/bert-keras

demo: $(VENV)/demo-installed
	$(BIN)/bert-keras demo

# Leg 1: TensorFlow 2.20, the whole suite (the JAX runner's tests run in the jax leg).
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS) --ignore=tests/test_pretrain_jax.py tests

# Leg 2: TensorFlow 2.21; the tests that need tf-models-official (the `needs_tf_models` list in
# tests/conftest.py) cannot run there, and the slow real-data tests and the model-level backend
# suite ran in leg 1 (and in the jax and torch legs).
test-tf221: install-tf221
	$(BIN_TF221)/python -m pytest $(PYTEST_ARGS) -m "not needs_tf_models and not slow" \
		--ignore=tests/test_backends.py --ignore=tests/test_pretrain_jax.py tests

# The model-level suite (tests/test_backends.py: parity on real weights, fit in float32 and
# bf16, checkpoints, fine-tuning, no TensorFlow on the model path) on the other Keras backends;
# the JAX leg also runs the pre-training runner on JAX (tests/test_pretrain_jax.py) and the
# accelerator benchmark at its tiny size on the CPU.
test-jax: install
	KERAS_BACKEND=jax $(BIN)/python -m pytest $(PYTEST_ARGS) tests/test_backends.py tests/test_pretrain_jax.py
	KERAS_BACKEND=jax $(BIN)/python benchmarks/bench_accelerator.py --preset tiny --steps 3

test-torch: install
	KERAS_BACKEND=torch $(BIN)/python -m pytest $(PYTEST_ARGS) tests/test_backends.py

# `pip install .` alone (a fresh venv, no extras): demo --fast, pretrain, export, predict.
check-library-only:
	PY=$(PY) bash tests/library_only_check.sh

clean:
	rm -rf $(VENV) $(VENV_TF221) .venv-library .pytest_cache
