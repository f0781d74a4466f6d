# The two set-up commands of the README: `make demo` (main job) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test test-fast bench clean

$(BIN)/bert-keras: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e ".[test]"
	touch $@

install: $(BIN)/bert-keras

demo: install
	$(BIN)/bert-keras demo

test: install
	$(BIN)/python -m pytest -q tests

clean:
	rm -rf $(VENV) .pytest_cache
