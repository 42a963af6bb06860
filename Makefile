# The two commands a new user needs: `make serve` and `make test`. Each installs what it
# needs into .venv, once: nothing is installed again until pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# `make serve EXTRAS=openai,postgres` adds extras to what serving installs
EXTRAS ?=
, := ,
SERVING := $(VENV)/.serving$(if $(EXTRAS),-$(subst $(,),-,$(EXTRAS)))
TESTING := $(VENV)/.testing
LINKED := $(VENV)/.linked
FILES := $(VENV)/.files

.PHONY: install serve test lint bench FORCE

# pip's own lines show the progress; setuptools' notice about strict editable installs
# (a UserWarning) is not for the user
PIP := PYTHONWARNINGS=ignore::UserWarning $(BIN)/python -m pip --disable-pip-version-check
STRICT := --config-settings editable_mode=strict

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# runpoint and what serving needs (no vendor SDK, no PostgreSQL driver, no dev tools); the
# relink below builds with the venv's setuptools, which must read pyproject.toml's license
$(SERVING): pyproject.toml | $(BIN)/python $(FILES)
	@echo "make: installing runpoint$(if $(EXTRAS),[$(EXTRAS)]) and what serving needs into $(VENV)"
	$(PIP) install "setuptools>=77" -e '.$(if $(EXTRAS),[$(EXTRAS)])' $(STRICT)
	touch $@ $(LINKED)

# everything (runpoint[all]), the dev tools and the example plugins
$(TESTING): pyproject.toml contrib/every_n_turns/pyproject.toml contrib/approval_webhook/pyproject.toml | $(BIN)/python $(FILES)
	@echo "make: installing runpoint[dev] (every extra and the dev tools) into $(VENV)"
	$(PIP) install "setuptools>=77" -e '.[dev]' $(STRICT)
	$(PIP) install -e contrib/every_n_turns $(STRICT)
	$(PIP) install -e contrib/approval_webhook $(STRICT)
	touch $@ $(VENV)/.serving $(LINKED)

# A strict editable install links each file of the packages: one added, renamed or removed
# needs the (quick) relink, which runs only when the list of files has changed.
$(FILES): FORCE | $(BIN)/python
	@find kernel plugins adapters -name __pycache__ -prune -o -type f -print | sort > $@.new
	@cmp -s $@.new $@ && rm $@.new || mv $@.new $@

$(LINKED): $(FILES)
	$(PIP) install --quiet --no-deps --no-build-isolation -e . $(STRICT)
	touch $@

install: $(TESTING) $(LINKED)

serve: $(SERVING) $(LINKED)
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
