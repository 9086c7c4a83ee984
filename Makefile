# The book's single entry point.  `make book` and `make test` do all the set-up on a
# fresh machine with only Python 3.11+ present; both are idempotent and stop at the
# first failure with a non-zero exit.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
# pytest workers for the unit tests and notebooks (the machine has 2 cores)
JOBS ?= 2

QUICK_DIR := _build/quick
QUICK_HTML := $(QUICK_DIR)/_build/html
NPM_DIR := _build/npm
SCALE_LOG := _build/scale.log

.PHONY: help book test lint unit notebooks canary web-assets book-quick executed browser bench clean venv golden pdf pdf-quick

help:
	@echo "make book   build the book at paper scale into _build/html (creates .venv if absent)"
	@echo "make test   lint (ruff, import-linter, mypy), unit tests, nbval on every chapter (quick scale), quick book build and its executed"
	@echo "            notebooks' outputs, browser check"
	@echo "make pdf    the whole book as one PDF, _build/pdf/fedbandit.pdf (after make book: reuses its execution cache)"
	@echo "make bench  benchmarks side by side with their peers -> benchmarks/results/{results.md,results.json} (about 10 min)"
	@echo "make clean  remove build outputs (keeps .venv and the experiment cache)"
	@echo "make golden rewrite tests/golden_results.json, the hashes of every computed result (only for a change"
	@echo "            meant to alter results; say why in the commit)"

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "fedbandit needs Python >= 3.11, found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Stamps record which extras are installed; they are redone when pyproject.toml changes.
$(VENV)/.book-installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[book]'
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

# The peers the benchmarks compare with (pinned in the bench extra).  FFHT's sdist does not
# declare its build dependencies, so it builds only without isolation (pybind11 and numpy
# from the extra); if it fails, its rows say "not available" and the run goes on.
$(VENV)/.bench-installed: pyproject.toml $(VENV)/.test-installed | $(PY)
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) -m pip install --quiet --no-build-isolation 'FFHT-unofficial==0.3' \
		|| echo "FFHT did not build: its benchmark rows will say not available"
	touch $@

venv: $(VENV)/.test-installed

# The notebooks the execution cache lacks are executed first, $(JOBS) at a time (longest first), into the
# cache that jupyter-book then reads: the build itself executes nothing and both cores work.
book: $(VENV)/.book-installed
	TQDM_DISABLE=1 FEDBANDIT_SCALE=paper $(PY) -m fedbandit.book.execution_cache _build/.jupyter_cache --execute $(JOBS)
	TQDM_DISABLE=1 FEDBANDIT_SCALE=paper $(BIN)/jupyter-book build . -W -n --keep-going
	@echo
	@echo "The book is built: open $(CURDIR)/_build/html/index.html"

test: $(VENV)/.test-installed
	$(MAKE) --no-print-directory lint unit notebooks canary book-quick executed pdf-quick browser
	@echo "make test: all stages passed"

# Cheap, so first: pyflakes, pycodestyle's E4/E7/E9 and import order ([tool.ruff] in pyproject.toml);
# the layer contracts ([tool.importlinter]; they read the checkout's fedbandit/, function-level imports
# too); the static checks of tests/test_architecture.py marked `lint` (no private names imported
# across modules, no fedbandit imports inside functions, the contracts' planted back-edges); then
# mypy on the packages [tool.mypy] lists.
lint: $(VENV)/.test-installed
	$(BIN)/ruff check fedbandit tests benchmarks
	$(BIN)/lint-imports --no-cache --no-logo
	$(BIN)/pytest -q -p no:cacheprovider -m lint tests/test_architecture.py
	$(BIN)/mypy

# The golden record of every computed result (tests/golden.py; checked by tests/test_golden.py).
golden: $(VENV)/.test-installed
	FEDBANDIT_SCALE=quick $(PY) tests/golden.py --write

unit: $(VENV)/.test-installed
	FEDBANDIT_SCALE=quick $(BIN)/pytest -n $(JOBS) -m "not browser" tests
	@cd / && $(CURDIR)/$(PY) -c 'import fedbandit' 2>/dev/null \
		|| { echo "fedbandit is no longer installed in $(VENV): a unit test uninstalled it (the notebooks' kernels need it)"; exit 1; }

notebooks: $(VENV)/.test-installed
	mkdir -p _build && rm -f $(SCALE_LOG)
	TQDM_DISABLE=1 FEDBANDIT_SCALE=quick FEDBANDIT_SCALE_LOG=$(CURDIR)/$(SCALE_LOG) \
		$(BIN)/pytest -n $(JOBS) --dist loadfile --nbval-lax -p no:cacheprovider chapters

canary: $(VENV)/.test-installed
	FEDBANDIT_SCALE_LOG=$(CURDIR)/$(SCALE_LOG) FEDBANDIT_CANARY_REQUIRED=1 \
		$(BIN)/pytest -q -p no:cacheprovider tests/test_canary.py

# MathJax and the ipywidgets manager from the npm registry, so the quick build serves them
# itself and the browser check needs no internet (the published book uses the CDNs).
web-assets:
	@if command -v npm >/dev/null; then \
		mkdir -p $(NPM_DIR) && npm install --silent --no-save --no-audit --no-fund --prefix $(NPM_DIR) \
			mathjax@3 requirejs@2 @jupyter-widgets/html-manager@^1.0; \
	else echo "npm not found: the quick build will load MathJax and widgets from CDNs (browser check skips)"; fi

book-quick: $(VENV)/.test-installed web-assets
	TQDM_DISABLE=1 FEDBANDIT_SCALE=quick $(PY) -m fedbandit.book.execution_cache $(QUICK_DIR)/_build/.jupyter_cache \
		--execute $(JOBS)
	if [ -d $(NPM_DIR)/node_modules/mathjax ]; then export FEDBANDIT_NPM_MODULES=$(CURDIR)/$(NPM_DIR)/node_modules; fi; \
	TQDM_DISABLE=1 FEDBANDIT_SCALE=quick $(BIN)/jupyter-book build . -W -n --keep-going --path-output $(QUICK_DIR)

# The figure classification of tests/test_book_structure.py against the outputs the quick
# build really produced: the notebooks it executed, with their outputs from its execution cache
# (myst-nb's jupyter_execute copies of cached pages have none), so nothing is executed again.
EXECUTED_DIR := $(QUICK_DIR)/_build/executed-notebooks

executed: $(VENV)/.test-installed
	$(PY) -m fedbandit.book.execution_cache $(QUICK_DIR)/_build/.jupyter_cache --export $(EXECUTED_DIR)
	FEDBANDIT_EXECUTED_NOTEBOOKS=$(CURDIR)/$(EXECUTED_DIR) $(BIN)/pytest -q -rs -p no:cacheprovider \
		tests/test_book_structure.py -k figure_classification_matches_executed_outputs

browser: $(VENV)/.test-installed
	FEDBANDIT_BOOK_HTML=$(CURDIR)/$(QUICK_HTML) $(BIN)/pytest -q -rs -m browser -p no:cacheprovider tests/test_browser.py

# The whole book as one PDF: Sphinx's single-page HTML build (every chapter on one page), printed by
# headless Chromium through playwright with the document outline (fedbandit.book.pdf; needs Debian's
# chromium).  It shares make book's execution cache, so after make book nothing is executed again;
# PDF_SCALE=quick PDF_DIR=$(QUICK_DIR) prints the quick build instead (its cache, quick scale).
PDF_SCALE ?= paper
PDF_DIR ?= .
pdf: $(VENV)/.test-installed web-assets
	$(PY) -m fedbandit.book.execution_cache $(PDF_DIR)/_build/.jupyter_cache
	if [ -d $(NPM_DIR)/node_modules/mathjax ]; then export FEDBANDIT_NPM_MODULES=$(CURDIR)/$(NPM_DIR)/node_modules; fi; \
	TQDM_DISABLE=1 FEDBANDIT_SCALE=$(PDF_SCALE) $(BIN)/jupyter-book build . --builder singlehtml -W -n --keep-going \
		--path-output $(PDF_DIR)
	$(PY) -m fedbandit.book.pdf $(PDF_DIR)/_build/singlehtml/index.html $(PDF_DIR)/_build/pdf/fedbandit.pdf
	@echo "The book's PDF: $(PDF_DIR)/_build/pdf/fedbandit.pdf"

# make test prints the quick build (its execution cache: nothing runs again), so the browser stage's
# test_pdf_holds_every_chapter checks a PDF of this checkout.
pdf-quick:
	$(MAKE) --no-print-directory pdf PDF_SCALE=quick PDF_DIR=$(QUICK_DIR)

# BENCH="hotpaths tree" runs some modules; BENCH_ARGS=--long adds the paper-scale chapter runs.
# Writes the committed benchmarks/results/{results.json,results.md} that the book's performance
# page reads; run it on a quiet machine before committing them (the file records the load).
bench: $(VENV)/.bench-installed
	$(PY) benchmarks/run.py $(BENCH) $(BENCH_ARGS)

clean:
	rm -rf _build .pytest_cache
