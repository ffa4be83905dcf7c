# The two set-up commands of the README: `make run` and `make test`.
# Each creates .venv on first use and installs everything (torch pinned by constraints.txt).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLE ?= examples/xor.json

.PHONY: run test lint setup

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e '.[gui,dev,detection,models,tracking,mlflow,search,formats]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/nodegraph edit $(EXAMPLE)

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -n 2 --durations=20 tests

lint: $(STAMP)
	$(BIN)/ruff check nodegraph nodes tests benchmarks examples tools
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/nodegraph blocks --markdown --check docs/blocks.md
