# The two commands of the README. Everything they need is installed here, from the registries.
PYTHON   ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
PYDEPS   := $(VENV)/.installed
NODEDEPS := node_modules/.installed

.PHONY: run test test-fast bench lint clean

$(PYDEPS): requirements.txt tests/requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "Python 3.11 or newer is needed (set PYTHON=...)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

$(NODEDEPS): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

## run: install what is needed, start Azurite and serve the API on http://127.0.0.1:7071
run: $(PYDEPS) $(NODEDEPS)
	$(BIN)/python -m devhost

## test: install what is needed, then lint and run the whole test suite
test: $(PYDEPS) $(NODEDEPS)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

## test-fast: the tests that need no process of their own (no Azurite, host or broker), in seconds
test-fast: $(PYDEPS)
	$(BIN)/python -m pytest -m "not services"

## bench: the benchmarks of bench/, results printed and written to bench/results/
bench: $(PYDEPS) $(NODEDEPS)
	$(BIN)/python -m bench.schedule
	$(BIN)/python -m bench.api
	$(BIN)/python -m bench.pipeline
	$(BIN)/python -m bench.actions
	$(BIN)/python -m bench.azurite_queue

lint: $(PYDEPS)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) node_modules .pytest_cache .hypothesis .ruff_cache .mypy_cache
