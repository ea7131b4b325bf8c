# Set-up is part of every target: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "policyopt needs Python >= 3.11, found " + sys.version.split()[0])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,plot]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/policyopt schedule

# pytest exits 5 when it collects no test: report it loudly, do not fail the build on it.
test: $(STAMP)
	$(BIN)/lint-imports --no-cache
	@$(BIN)/python -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "WARNING: pytest collected no tests (exit 5) - nothing was checked"; exit 0; fi; \
	exit $$rc

bench: $(STAMP)
	$(BIN)/python tests/benchmarks/bench.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
