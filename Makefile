# The course's two commands (see README):
#   make lab    set up, then open the course in JupyterLab
#   make test   set up, then run every test: unit tests, every notebook under nbval, the browser test
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
TORCH   := torch==2.13.0
NBVAL   := --nbval --nbval-current-env --nbval-sanitize-with nbval_sanitize.cfg --nbval-cell-timeout=300

.PHONY: lab test install notebooks check-notebooks unit quick nbval browser-deps data clean

$(BIN)/python:
	@command -v $(PY) >/dev/null 2>&1 || { echo "needs $(PY) (or: make PY=python3 ...)"; exit 1; }
	$(PY) -m venv $(VENV)

# torch first and pinned: a bare `torch` requirement would pull a CUDA build.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

data: install
	$(BIN)/python -m ddp_lessons make-vqa-data

# JupyterLab refuses to run as root unless told; containers and lent machines often are root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: install data
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 $(ROOT_FLAG) notebooks/00_first_launch.ipynb

browser-deps:
	@test -x /usr/bin/chromium || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

test: install browser-deps
	$(BIN)/python -m pytest $(NBVAL) tests notebooks

unit: install
	$(BIN)/python -m pytest tests --ignore=tests/test_browser.py

# While editing: the unit tests without the slow multi-process ones (`make test` runs them all).
quick: install
	$(BIN)/python -m pytest tests --ignore=tests/test_browser.py -m "not slow"

nbval: install
	$(BIN)/python -m pytest $(NBVAL) notebooks

# The only way reference outputs are made: execute every notebook from its source.
notebooks: install
	$(BIN)/python scripts/notebooks.py build $(NB)

check-notebooks: install
	$(BIN)/python scripts/notebooks.py check

clean:
	rm -rf $(VENV) data/vqa*
