# The two commands of the README. Everything they need is installed here, from the registries:
# `make run` only what running needs, `make test` (and test-fast, lint, bench) the rest too.
PYTHON   ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
RUNDEPS  := $(VENV)/.installed-run
TESTDEPS := $(VENV)/.installed-test
NODEDEPS := node_modules/.installed

.PHONY: run test test-fast bench lint browser clean

# The app's packages (requirements.txt) and the local host's (devhost/requirements.txt).
$(RUNDEPS): requirements.txt devhost/requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "Python 3.11 or newer is needed (set PYTHON=...)" >&2; exit 1; }
	@echo "Installing the app's Python packages into $(VENV) (first run only)..."
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -r requirements.txt -r devhost/requirements.txt
	touch $@

# The test toolchain on top: linters, pytest, the SDKs the tests call the API with, Playwright.
$(TESTDEPS): $(RUNDEPS) tests/requirements.txt
	@echo "Installing the test toolchain into $(VENV) (first time only)..."
	$(BIN)/pip install --disable-pip-version-check -r tests/requirements.txt
	touch $@

$(NODEDEPS): package.json package-lock.json
	@echo "Installing Azurite and axe-core into node_modules (first time only, half a minute)..."
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

## run: install what running needs, start Azurite (data kept in .azurite/) and serve the API on
##      http://127.0.0.1:7071; `make run FRESH=1` deletes Azurite's data first
run: $(RUNDEPS) $(NODEDEPS)
	$(BIN)/python -m devhost $(if $(filter-out 0,$(FRESH)),--fresh)

## test: install what is needed, then lint and run the whole test suite
test: $(TESTDEPS) $(NODEDEPS) browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

# The browser tests drive Debian's Chromium through Playwright (`playwright install` downloads
# from a CDN, which is not used here). SCHEDULER_CHROMIUM=/path/to/chrome uses another build.
browser:
	@if [ -n "$(SCHEDULER_CHROMIUM)" ] || [ -x /usr/bin/chromium ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing Chromium for the browser tests (apt-get, first time only)..."; \
		apt-get update && apt-get install -y --no-install-recommends chromium; \
	else \
		echo "The browser tests need Chromium at /usr/bin/chromium. Install it" >&2; \
		echo "(Debian/Ubuntu: sudo apt-get install chromium), or set" >&2; \
		echo "SCHEDULER_CHROMIUM=/path/to/chrome to use another build." >&2; \
		exit 1; \
	fi

## test-fast: the tests that need no process of their own (no Azurite, host or broker), in seconds
test-fast: $(TESTDEPS)
	$(BIN)/python -m pytest -m "not services"

## bench: the benchmarks of bench/, results printed and written to bench/results/
bench: $(TESTDEPS) $(NODEDEPS)
	$(BIN)/python -m bench.schedule
	$(BIN)/python -m bench.api
	$(BIN)/python -m bench.pipeline
	$(BIN)/python -m bench.pipeline --compare-processes
	$(BIN)/python -m bench.burst
	$(BIN)/python -m bench.actions
	$(BIN)/python -m bench.azurite_queue

lint: $(TESTDEPS)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) node_modules .pytest_cache .hypothesis .ruff_cache .mypy_cache
