# Two entry points on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= 2
# CPU build of torch; GPU users: see README ("GPU machines").
TORCH_SPEC ?= torch==2.13.0

.PHONY: install demo test lint format clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/snakemake --cores $(CORES)

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check nnunet_core tests benchmarks
	$(BIN)/snakefmt --check Snakefile workflow
	$(BIN)/snakemake --lint

format: install
	$(BIN)/ruff format nnunet_core tests benchmarks
	$(BIN)/snakefmt Snakefile workflow

clean:
	rm -rf work .snakemake
