# Set-up is part of every target: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.installed-docs

.PHONY: demo test bench bench-quick docs notebooks clean

# The packages are installed by uv (itself installed into the venv by pip), then byte-compiled by compileall on both
# cores, all but the libraries' own test folders, which nothing imports: where PYTHONDONTWRITEBYTECODE is set, a
# process would otherwise compile every library it imports again.  On a clean clone (2-core machine, uv's cache warm,
# 2026-12-03): uv's --compile-bytecode took 34 s for the test and docs set, compileall 22 s; pip took 80 s.  The docs
# set (which `make test` needs) is a superset of the test set and is installed in one step, so a clean clone compiles
# once: a second compileall over the installed files costs 6 s even with nothing to compile.  compileall's exit status
# is not checked: a library may ship a file that is not Python 3.11 (a template), which uv's compiler skips as well.
UV := VIRTUAL_ENV=$(VENV) $(BIN)/uv pip install --quiet --python $(BIN)/python
COMPILE := $(BIN)/python -m compileall -q -j 0 -x '/site-packages/.*/tests?/' $(VENV)/lib > /dev/null || true
define VENV_UP
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "policyopt needs Python >= 3.11, found " + sys.version.split()[0])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv
endef

$(STAMP): pyproject.toml
	$(VENV_UP)
	$(UV) -e '.[test,plot]'
	@$(COMPILE)
	@touch $(STAMP)

# The demo keeps its deterministic steps (the held-out model check, the bootstraps of the readings' MSE and of the
# backtest's Δ(t), the PLD accounting) in the venv (policyopt.io.result_cache, keyed by the inputs, the source files
# and the library versions): a second `make demo` prints the same in about a second instead of five.  An environment
# that sets POLICYOPT_CACHE_DIR (empty: no cache) keeps its own setting.
demo: export POLICYOPT_CACHE_DIR ?= $(abspath $(VENV))/policyopt-cache
demo: $(STAMP)
	$(BIN)/policyopt schedule --privacy model-free --max-rmse 0.19 --max-age 24 --max-interval 24 --backtest 0.5

# Two pytest-xdist workers (the machines have 2 cores), `--dist loadgroup` so that tests marked with one
# `xdist_group` share a worker (a docs page's examples, run in page order); --durations=15 lists the 15 slowest tests.
# pytest exits 5 when it collects no test: report it loudly, do not fail the build on it.  The docs extra is installed
# too: tests build a small Sphinx site from the notebooks (tests/docs/test_notebook_figures.py).
# The layer contract (import-linter) runs on the installed layout: problems/ and solvers/ are mapped into the package,
# which an editable install hides from grimp, so tests/_layout.py builds the wheel into a scratch folder and lints that.
# tests/_compile_kernels.py fills numba's on-disk caches once, serially, before the workers start (beside the layer
# contract, one core each): on a clean clone the workers, their warm servers and the commands they start otherwise all
# compiled the same kernels at once.  On the other core, after the layer contract, the project's own sources are
# byte-compiled (compileall writes whatever PYTHONDONTWRITEBYTECODE says, and a process reads an existing .pyc either
# way; the libraries were compiled at install) and one collection with writing allowed stores pytest's rewritten test
# modules: each worker's collection then took 4.0 s instead of 13.7 s (clean clone), and every command the tests start
# imports policyopt without compiling it.  The real run reports any collection error.
# Single-threaded BLAS/OpenMP in each test process (unless set): two xdist workers plus the commands they start already
# fill the two cores, and threaded BLAS on top made the suite 14 % slower (problems_solvers + two files: 208 s -> 178 s).
# The venv's bin first on PATH, as in an activated venv: the documented commands find `policyopt` there
# (tests/docs/test_commands.py puts it first where it is not), and one warm CLI server per test process then serves them
# and the other tests alike (PATH is part of the start-up environment a server is chosen by, tests/_warm_cli.py).
test: export PATH := $(abspath $(BIN)):$(PATH)
test: export OPENBLAS_NUM_THREADS ?= 1
test: export OMP_NUM_THREADS ?= 1
test: $(DOCS_STAMP)
	@$(BIN)/python tests/_compile_kernels.py & kernels=$$!; \
	$(BIN)/python tests/_layout.py; layout=$$?; \
	$(BIN)/python -m compileall -q policyopt problems solvers tests > /dev/null; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest --collect-only -q -p no:cacheprovider > /dev/null 2>&1; \
	wait $$kernels; compiled=$$?; \
	test $$layout -eq 0 && test $$compiled -eq 0
	@$(BIN)/python -m pytest -n 2 --dist loadgroup --durations=15; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "WARNING: pytest collected no tests (exit 5) - nothing was checked"; exit 0; fi; \
	exit $$rc

# Durations measured on the 2-core reference machine at load average ~1.5; a busy machine takes longer.
bench: $(STAMP)
	@echo "make bench: expected duration about 135 minutes, 45 of them the 10^6-meter Dask runs (20 the held-out Markov check and the per-user model fits), 40 the guarantee zoo (bench_guarantee) (POLICYOPT_BENCH_DASK_USERS=40000 shrinks them; make bench-quick: under 2 minutes)"
	$(BIN)/python tests/benchmarks/bench.py

bench-quick: $(STAMP)
	@echo "make bench-quick: expected duration about 1 minute"
	$(BIN)/python tests/benchmarks/bench.py --quick

# The documentation: Sphinx + numpydoc + myst-nb (notebooks from their stored outputs) + pydata-sphinx-theme,
# warnings are errors.  The docs extra has its own stamp; its set-up installs the test set too (and stamps it), and
# `make test` uses it.

$(DOCS_STAMP): pyproject.toml
	$(VENV_UP)
	$(UV) -e '.[test,plot,docs]'
	@$(COMPILE)
	@touch $(STAMP) $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/sphinx-build -b html -W --keep-going -q docs docs/_build/html
	$(BIN)/python docs/check_notebook_figures.py docs/_build/html
	@echo "documentation: docs/_build/html/index.html"

# Re-execute every notebook (inline matplotlib backend) and store its outputs, figures included, in place: GitHub and
# `make docs` show the stored outputs.  Run it after changing a notebook or the code it calls (about 1 minute).
notebooks: $(STAMP)
	$(BIN)/python docs/store_notebook_outputs.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis docs/_build docs/_notebooks
