# Two entry points of the quick start; both create the virtualenv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench notebook clean torch-npu-sources catalogs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,bench,notebooks,interop,lint]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/sk-run demo

# One pytest worker per core (pytest-xdist); a test file stays on one worker, so module
# fixtures (the Ray cluster) start once and files that share nothing run side by side.
test: $(STAMP)
	$(BIN)/python -m pytest -n auto --dist loadfile

# Jupyter Lab on examples/ (installs the server once; open the printed URL)
notebook: $(STAMP)
	$(BIN)/pip install -q -e '.[jupyter]'
	$(BIN)/jupyter lab --notebook-dir=examples

# The real torch-npu releases' Python sources for tests/test_torch_npu_api.py (the npu backend's
# API check): pip-downloads each wheel of the checked range once (~45 MB each), keeps only its
# .py files in .cache/torch-npu/<version>/. Not part of `make test` (minutes of downloads):
# without the cache those tests skip and say to run this.
torch-npu-sources: $(STAMP)
	$(BIN)/python tests/torch_npu_sources.py

# ruff (lint and import order) and mypy (strict: pyproject.toml says what is relaxed and why)
lint: $(STAMP)
	$(BIN)/ruff check sk_analytics sk_runner tests benchmarks
	$(BIN)/mypy

# The message catalogs: compile each sk_analytics/messages/locale/<lang>/LC_MESSAGES/sk_tune.po (the source) into the
# sk_tune.mo beside it (committed; tests/test_messages.py fails when a .mo differs from its .po).
catalogs: $(STAMP)
	$(BIN)/pybabel compile -d sk_analytics/messages/locale -D sk_tune --statistics

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
