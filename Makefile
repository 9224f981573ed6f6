# Two entry points of the quick start; both create the virtualenv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench notebook clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,bench,notebooks]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/sk-run demo

test: $(STAMP)
	$(BIN)/python -m pytest

# Jupyter Lab on examples/ (installs the server once; open the printed URL)
notebook: $(STAMP)
	$(BIN)/pip install -q -e '.[jupyter]'
	$(BIN)/jupyter lab --notebook-dir=examples

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
