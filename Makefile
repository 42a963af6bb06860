# The two commands a new user needs: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install serve test lint bench

$(STAMP): pyproject.toml contrib/every_n_turns/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=69"
	$(BIN)/python -m pip install --quiet -e '.[dev]' --config-settings editable_mode=strict
	$(BIN)/python -m pip install --quiet -e contrib/every_n_turns --config-settings editable_mode=strict
	touch $(STAMP)

# Strict editable installs link each module: new modules need a (quick) reinstall.
install: $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . --config-settings editable_mode=strict

serve: install
	$(BIN)/runpoint serve

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy contrib/bench
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest

bench: install
	$(BIN)/python contrib/bench/storage.py
