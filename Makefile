# intermission: `make lab` (JupyterLab on the tutorials) and `make test` (every test).
# Both create the virtual environment and install the package with all extras first.

VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
NOTEBOOKS := $(wildcard notebooks/*.ipynb)

.PHONY: setup lab test unit notebooks-test lint bench notebooks clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[notebook,postgres,openai,pydantic-ai,mcp,agui,dev]'
	touch $(STAMP)

setup: $(STAMP)

# The real mermaid parser (npm's mermaid in jsdom) for the diagram-escaping test.
JS_STAMP := tests/js/node_modules/.installed-stamp
$(JS_STAMP): tests/js/package.json tests/js/package-lock.json
	npm ci --prefix tests/js --no-audit --no-fund --loglevel=error
	touch $@

# JupyterLab refuses to run as root unless told; containers and CI machines often are root.
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(LAB_ARGS)

lint: setup
	$(VENV)/bin/ruff check src tests $(wildcard bench/*.py) $(wildcard notebooks/*.py)
	$(VENV)/bin/mypy --strict src

unit: setup $(JS_STAMP)
	$(PY) -m pytest tests -q

# Tutorials leave decisions to a person's click; under test the code twins decide instead
# (notebooks/conftest.py sets that, the sanitizer and the kernel: plain `pytest --nbval
# notebooks/` works the same).
notebooks-test: setup
	@if [ -n "$(NOTEBOOKS)" ]; then \
	  $(PY) -m pytest -q -p no:cacheprovider --nbval notebooks/; \
	fi

test: lint unit notebooks-test

# Re-execute every tutorial and store its outputs as a person sees them before deciding;
# cells whose output depends on the decision are tagged for nbval to run, not compare.
notebooks: setup
	$(PY) notebooks/store_outputs.py $(NOTEBOOKS)

# Benchmarks install the peers (LangGraph, Burr) into their own environment.
BENCH_VENV ?= .venv-bench
$(BENCH_VENV)/.installed-stamp: pyproject.toml bench/requirements.txt
	python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install -q -e '.[notebook,pydantic-ai,mcp]' -r bench/requirements.txt
	touch $@

bench: $(BENCH_VENV)/.installed-stamp
	$(BENCH_VENV)/bin/python bench/run.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
