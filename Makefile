# The two set-up commands of the README: `make run` and `make test`.
# Each creates .venv on first use and installs everything (torch pinned by constraints.txt).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLE ?= examples/xor.json

.PHONY: run test test-slow bench-targets test-all fuzz-smoke lint setup

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e '.[gui,dev,detection,models,hf,tracking,mlflow,search,formats,remote]'
	# the Jupyter kernel "nodegraph" (this .venv's python), for the README's notebook section
	$(BIN)/python -m ipykernel install --sys-prefix --name nodegraph --display-name "Python (nodegraph)"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/nodegraph edit $(EXAMPLE)

# `make test`: the quick set (everything not marked slow); `make test-all` adds the long
# learning and end-to-end runs, as a step of their own, and the trained fuzz smoke.
test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -n 2 -m "not slow" --durations=20 tests

test-slow: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -n 2 -m "slow and not benchmark and not table" --durations=20 tests

# the speed targets, alone: a test running beside them moves their ratios past the noise
bench-targets: $(STAMP)
	$(BIN)/python -m pytest -m benchmark tests/test_benchmark_targets.py

fuzz-smoke: $(STAMP)
	$(BIN)/python benchmarks/fuzz.py --smoke

test-all: test test-slow bench-targets fuzz-smoke

lint: $(STAMP)
	$(BIN)/ruff check nodegraph nodes tests benchmarks examples tools
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/nodegraph blocks --markdown --check docs/blocks.md
