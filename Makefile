# Two entry points on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= 2
# CPU build of torch; GPU users: see docs/getting-started.md ("GPU machines").
TORCH_SPEC ?= torch==2.13.0

.PHONY: install install-slurm install-lsf install-docs install-profile demo test test-fast lint docs format clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The stamp of an install names the torch requirement it was made with (a checksum of
# TORCH_SPEC), so a new TORCH_SPEC (a CUDA build) reinstalls and `make -n` shows it.
# TORCH_SPEC is unquoted on purpose: it may hold pip options (--index-url URL) after the name.
INSTALLED := $(VENV)/.installed-$(shell echo '$(TORCH_SPEC)' | cksum | cut -d ' ' -f 1)
# pip byte-compiles the packages it installs, but not an editable one: COMPILE writes ours (and the
# tests' and benchmarks'), so that no process compiles them again from source. Python reads
# these caches also where PYTHONDONTWRITEBYTECODE keeps it from writing them; the test suite's
# ~1,000 Python processes saved about 0.08 CPU s each (make test compiles what changed since).
COMPILE = $(BIN)/python -m compileall -q nnunet_core benchmarks tests >/dev/null
$(INSTALLED): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e ".[dev]"
	$(COMPILE)
	rm -f $(VENV)/.installed*
	touch $@

# Optional extras in the same venv: `make install EXTRAS=mlflow` (experiment tracking: mlflow,
# wandb; several: EXTRAS=mlflow,wandb). Without EXTRAS, install adds nothing to the stamp's.
EXTRAS ?=
install: $(INSTALLED)
ifneq ($(strip $(EXTRAS)),)
	$(BIN)/pip install -q -e ".[$(EXTRAS),dev]"
endif

# The SLURM executor plugins (the [slurm] extra) in the same venv.
install-slurm: install
	$(BIN)/pip install -q -e ".[slurm,dev]"

# The LSF executor plugin (the [lsf] extra) in the same venv.
install-lsf: install
	$(BIN)/pip install -q -e ".[lsf,dev]"

# The docs site's tools (the [docs] extra: mkdocs, mkdocs-material) in the same venv; its stamp
# goes with the install's (a new install removes it) and with pyproject.toml.
DOCS_INSTALLED := $(VENV)/.installed-docs
$(DOCS_INSTALLED): $(INSTALLED)
	$(BIN)/pip install -q -e ".[docs,dev]"
	touch $@

install-docs: $(DOCS_INSTALLED)

# `snakemake --profile slurm` from anywhere: links profiles/slurm into Snakemake's user profile
# folder ($XDG_CONFIG_HOME/snakemake, default ~/.config/snakemake). Refuses to replace a profile
# of that name that is not such a link.
PROFILE_HOME ?= $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/snakemake
install-profile:
	@mkdir -p "$(PROFILE_HOME)"
	@if [ -e "$(PROFILE_HOME)/slurm" ] && [ ! -L "$(PROFILE_HOME)/slurm" ]; then \
		echo "install-profile: $(PROFILE_HOME)/slurm exists and is not a link; move it away first" >&2; \
		exit 1; \
	fi
	ln -sfn "$(CURDIR)/profiles/slurm" "$(PROFILE_HOME)/slurm"
	@echo "snakemake --profile slurm now reads $(CURDIR)/profiles/slurm"

demo: install
	$(BIN)/snakemake --cores $(CORES)

# Test workers (pytest-xdist): a test mostly runs one single-threaded process at a time and
# many wait on another (a job, a signal, a scheduler), so 6 workers share 2 cores: with 4, quiet
# runs took 19:56-22:52 min and left the cores idle in the gaps; with 6, 16:21 at 100 % busy
# throughout (December 2026, this machine; the SLURM part beside it both times).
# --dist loadfile keeps each test file on one worker, in its order: module fixtures (whole
# workflow runs) are built once, and some tests read what an earlier test of their file left.
# Files are handed out in collection order (--no-loadscope-reorder: xdist would sort them by
# their number of tests), which tests/conftest.py makes longest first, so the long runs start at
# once (tests/unit/test_make_test_workers.py checks both). The SLURM tests (marker cluster, all
# in tests/cluster, which is all that part collects) run at the same time in a pytest of their
# own, one after the other: one test cluster, jobs timed against walltimes, mostly waiting on the
# scheduler. Their output follows the others' (kept in $(CLUSTER_LOG) meanwhile); make test fails
# if either part fails.
TEST_JOBS ?= 6
CLUSTER_LOG ?= .cluster-tests.log
# The slowest tests are printed at the end of each part, so that a run (CI's included) shows
# where the suite's time goes.
DURATIONS ?= 25

test: install
	@$(COMPILE)
	@$(BIN)/python -m pytest -q -m cluster --durations $(DURATIONS) tests/cluster >$(CLUSTER_LOG) 2>&1 & \
	cluster=$$!; \
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder -m "not cluster" --durations $(DURATIONS); \
	rest=$$?; wait $$cluster; slurm=$$?; \
	echo "== the SLURM tests (marker cluster), run beside the others: exit $$slurm =="; \
	cat $(CLUSTER_LOG); test $$rest = 0 && test $$slurm = 0

# The edit-test loop: everything but the end-to-end runs (marker slow) and the SLURM tests
# (marker cluster); a few minutes instead of make test's full run. Not a replacement.
test-fast: install
	@$(COMPILE)
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder -m "not slow and not cluster"

# ruff; the package layers (.importlinter: no two packages import each other); snakefmt;
# snakemake --lint, less its one deliberate remark (no per-rule conda env: see docs/development.md);
# and the docs site, built strictly (a broken link or anchor fails it).
lint: install install-docs
	$(BIN)/ruff check nnunet_core tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/snakefmt --check Snakefile workflow
	$(BIN)/python tests/lint_workflow.py
	$(MKDOCS) build --strict --clean --site-dir $(SITE)

# The docs site (mkdocs.yml) into site/; the reference pages are generated from the code.
SITE ?= site
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
docs: install-docs
	$(MKDOCS) build --strict --clean --site-dir $(SITE)

format: install
	$(BIN)/ruff format nnunet_core tests benchmarks
	$(BIN)/snakefmt Snakefile workflow

clean:
	rm -rf work .snakemake site
