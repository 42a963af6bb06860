# The two commands a new user needs: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LINKED := $(VENV)/.linked

.PHONY: install serve test lint bench

# pip's --quiet leaves setuptools' notices on; strict editable installs always print one
PIP := PYTHONWARNINGS=ignore::UserWarning $(BIN)/python -m pip
# A strict editable install links each module: adding, renaming or removing one changes
# its directory, and then (only then) the quick relink below runs again.
PACKAGE_DIRS := $(shell find kernel plugins adapters -type d -not -name __pycache__)

$(STAMP): pyproject.toml contrib/every_n_turns/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip "setuptools>=77"
	$(PIP) install --quiet -e '.[dev]' --config-settings editable_mode=strict
	$(PIP) install --quiet -e contrib/every_n_turns --config-settings editable_mode=strict
	touch $(STAMP)

$(LINKED): $(STAMP) $(PACKAGE_DIRS)
	$(PIP) install --quiet --no-deps --no-build-isolation -e . --config-settings editable_mode=strict
	touch $(LINKED)

install: $(LINKED)

serve: install
	$(BIN)/runpoint serve

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy contrib/bench
	$(BIN)/lint-imports

# two workers, a test module each at a time (module fixtures are set up once)
test: lint
	$(BIN)/pytest -n 2 --dist loadfile

bench: install
	$(BIN)/python contrib/bench/storage.py
	$(BIN)/python contrib/bench/startup.py
