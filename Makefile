# The two commands of the README. Everything they need is installed here, from the registries.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYDEPS := $(VENV)/.installed

.PHONY: test bench lint clean

$(PYDEPS): requirements.txt tests/requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "Python 3.11 or newer is needed (set PYTHON=...)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

## test: install what is needed, then lint and run the whole test suite
test: $(PYDEPS)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

## bench: the benchmarks of bench/, results printed and written to bench/results/
bench: $(PYDEPS)
	$(BIN)/python -m bench.schedule

lint: $(PYDEPS)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache
