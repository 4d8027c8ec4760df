# The two commands of the README. Everything they need is installed here, from the registries:
# `make run` only what running needs, `make test` (and test-fast, lint, bench) the rest too.
#
# Python: 3.13 when this machine has it (on PATH, or installed by pyenv), since Azure runs the app
# on 3.13 through the runtime library requirements.txt pins (azure-functions-runtime), and the
# local host then runs every function through that library too. Otherwise python3, 3.11 or newer,
# with the functions called directly (azure-functions 1.x). PYTHON=... chooses another.
# `make test` on 3.13 also runs the fast tests on a Python 3.11 or 3.12 if there is one
# (.venv311), since the app supports those locally too (docs/runtime.md).
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell for candidate in python3.13 $$(pyenv root 2>/dev/null)/versions/3.13*/bin/python3.13 python3; do \
	"$$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 \
	&& { echo "$$candidate"; break; }; done)
endif
# A Python 3.11 or 3.12 for the fast tests beside a 3.13 environment (none: they are skipped).
OLDER_PYTHON := $(shell for candidate in python3.11 $$(pyenv root 2>/dev/null)/versions/3.11*/bin/python3.11 \
	python3.12 $$(pyenv root 2>/dev/null)/versions/3.12*/bin/python3.12 python3; do \
	"$$candidate" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info < (3, 13))' >/dev/null 2>&1 \
	&& { echo "$$candidate"; break; }; done)
PY_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
IS_313 := $(shell $(PYTHON) -c 'import sys; print("yes" if sys.version_info >= (3, 13) else "")' 2>/dev/null)
VENV     := .venv
BIN      := $(VENV)/bin
# Named by the Python version, so that choosing another Python makes .venv again.
RUNDEPS  := $(VENV)/.installed-run-$(PY_VERSION)
TESTDEPS := $(VENV)/.installed-test-$(PY_VERSION)
NODEDEPS := node_modules/.installed
SERVICEBUSDEPS := $(VENV)/.installed-service-bus-$(PY_VERSION)
OLDER_VENV := .venv311
OLDER_DEPS := $(OLDER_VENV)/.installed-test

.PHONY: run test test-fast templates bench lint browser clean

# The app's packages (requirements.txt) and the local host's (devhost/requirements.txt); on
# Python 3.13 the runtime library's message classes are generated then (devhost/rpc).
$(RUNDEPS): requirements.txt devhost/requirements.txt
	@test -n "$(PYTHON)" && $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "Python 3.11 or newer is needed, 3.13 preferred (set PYTHON=...)" >&2; exit 1; }
	@if [ -x $(BIN)/python ] && [ "$$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != "$(PY_VERSION)" ]; then \
		echo "$(VENV) was made with another Python than $(PYTHON) ($(PY_VERSION)): making it again"; \
		rm -rf $(VENV); \
	fi
	@echo "Installing the app's Python packages into $(VENV) with $(PYTHON) (first run only)..."
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -r requirements.txt -r devhost/requirements.txt
	if $(BIN)/python -c 'import grpc_tools' 2>/dev/null; then $(BIN)/python -m devhost.rpc; fi
	touch $@

# The test toolchain on top: linters, pytest, the SDKs the tests call the API with, Playwright.
$(TESTDEPS): $(RUNDEPS) tests/requirements.txt
	@echo "Installing the test toolchain into $(VENV) (first time only)..."
	$(BIN)/pip install --disable-pip-version-check -r tests/requirements.txt
	touch $@

# Python 3.11 or 3.12 beside a 3.13 environment: the test toolchain, for the fast tests.
$(OLDER_DEPS): requirements.txt devhost/requirements.txt tests/requirements.txt
	@echo "Installing the test toolchain into $(OLDER_VENV) with $(OLDER_PYTHON) (first time only)..."
	test -x $(OLDER_VENV)/bin/python || $(OLDER_PYTHON) -m venv $(OLDER_VENV)
	$(OLDER_VENV)/bin/pip install --disable-pip-version-check -r tests/requirements.txt
	touch $@

# Which path runs the functions, said before `run` and `test`.
SAY_RUNTIME = $(BIN)/python -c 'import importlib.util, sys; v = "%d.%d" % sys.version_info[:2]; \
	print(f"Python {v}: " + ("the functions run through azure-functions-runtime, as in Azure." \
	if importlib.util.find_spec("azure_functions_runtime") else "the functions are called directly \
	(azure-functions 1.x). Python 3.13 was not found: with it, they would run through Azure\x27s \
	runtime library (azure-functions-runtime), as in Azure."))'

# The local Service Bus stand-in's AMQP library, for `make run SERVICE_BUS=1` only.
$(SERVICEBUSDEPS): $(RUNDEPS) devhost/service-bus-requirements.txt
	@echo "Installing the local Service Bus stand-in's AMQP library (first time only)..."
	$(BIN)/pip install --disable-pip-version-check -r devhost/service-bus-requirements.txt
	touch $@

$(NODEDEPS): package.json package-lock.json
	@echo "Installing Azurite and axe-core into node_modules (first time only, half a minute)..."
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

## run: install what running needs, start Azurite (data kept in .azurite/) and serve the API on
##      http://127.0.0.1:7071; `make run FRESH=1` deletes Azurite's data first;
##      `make run SERVICE_BUS=1` also gives Service Bus jobs a local namespace
run: $(RUNDEPS) $(NODEDEPS) $(if $(filter-out 0,$(SERVICE_BUS)),$(SERVICEBUSDEPS))
	@$(SAY_RUNTIME)
	$(BIN)/python -m devhost $(if $(filter-out 0,$(FRESH)),--fresh) \
		$(if $(filter-out 0,$(SERVICE_BUS)),--service-bus)

## test: install what is needed, then lint and run the whole test suite; on Python 3.13, also
##       the fast tests on Python 3.11 or 3.12 when there is one
test: $(TESTDEPS) $(NODEDEPS) browser $(if $(OLDER_PYTHON),$(if $(IS_313),$(OLDER_DEPS)))
	@$(SAY_RUNTIME)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	node_modules/.bin/tsc -p tsconfig.json
	$(if $(and $(IS_313),$(OLDER_PYTHON)),DEVHOST_DIRECT_PYTHON=$(OLDER_VENV)/bin/python) $(BIN)/python -m pytest
	@echo "The storage and execution tests again, on the SDK's storage clients (SCHEDULER_STORAGE_CLIENT=sdk):"
	SCHEDULER_STORAGE_CLIENT=sdk $(BIN)/python -m pytest tests/storage tests/execution -q
ifneq ($(IS_313),)
ifneq ($(OLDER_PYTHON),)
	@echo "The fast tests on $$($(OLDER_VENV)/bin/python -V), the functions called directly:"
	$(OLDER_VENV)/bin/python -m pytest -m "not services" -q
else
	@echo "No Python 3.11 or 3.12 found: the fast tests ran on Python 3.13 only."
endif
endif

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

## templates: the template command of docs/templates.md with the project's environment, e.g.
##            make templates ARGS="export --resource-group my-rg -o backup.json"
templates: $(RUNDEPS)
	$(BIN)/python -m devhost.templates $(ARGS)

## test-fast: the tests that need no process of their own (no Azurite, host or broker), in seconds
test-fast: $(TESTDEPS)
	$(BIN)/python -m pytest -m "not services"

## bench: the benchmarks of bench/, results printed and written to bench/results/
bench: $(TESTDEPS) $(NODEDEPS)
	$(BIN)/python -m bench.schedule
	$(BIN)/python -m bench.api
	$(BIN)/python -m bench.cpu
	$(BIN)/python -m bench.pipeline
	$(BIN)/python -m bench.pipeline --compare-processes
	$(BIN)/python -m bench.burst
	$(BIN)/python -m bench.actions
	$(BIN)/python -m bench.azurite_queue
	$(BIN)/python -m bench.templates
	$(if $(IS_313),$(BIN)/python -m bench.runtime,@echo "bench.runtime needs Python 3.13: skipped")

lint: $(TESTDEPS) $(NODEDEPS)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	node_modules/.bin/tsc -p tsconfig.json

clean:
	rm -rf $(VENV) $(OLDER_VENV) .devhost-rpc node_modules .pytest_cache .hypothesis .ruff_cache .mypy_cache
