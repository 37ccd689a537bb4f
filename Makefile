# The course's two commands (see README):
#   make lab    set up, then open the course in JupyterLab
#   make test   set up with the test tools, then run every test: lint, unit tests, every notebook under nbval, the browser test
PY          ?= python3.11
VENV        := .venv
BIN         := $(VENV)/bin
LAB_STAMP   := $(VENV)/.installed-lab
TEST_STAMP  := $(VENV)/.installed-test
# torch's build is chosen by the index it comes from, not by its version: PyTorch's own
# CPU index, as its install page gives it (scripts/install_torch.py says what happens
# where that index cannot be reached). A torch already in .venv (a CUDA build) is kept.
TORCH       ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
NBVAL       := --nbval --nbval-current-env --nbval-sanitize-with nbval_sanitize.cfg --nbval-cell-timeout=300
# JupyterLab for the course: served from the repository root, so that jupytext finds the
# pairing in pyproject.toml (saving a notebook updates notebooks/src/), autosave off (running
# cells never rewrites a tracked notebook; Ctrl+S saves), opened on the first notebook.
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json

.PHONY: lab test install install-test notebooks check-notebooks unit quick nbval lint stress verdicts browser-deps data clean

$(BIN)/python:
	@command -v $(PY) >/dev/null 2>&1 || { echo "needs $(PY) (or: make PY=python3 ...)"; exit 1; }
	$(PY) -m venv $(VENV)

$(LAB_STAMP): $(BIN)/python pyproject.toml scripts/install_torch.py
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python scripts/install_torch.py --spec '$(TORCH)' --index '$(TORCH_INDEX)'
	$(BIN)/python -m pip install --progress-bar on -e '.[course]'
	@mkdir -p $(dir $(LAB_SETTINGS))
	@echo '{"@jupyterlab/docmanager-extension:plugin": {"autosave": false}}' > $(LAB_SETTINGS)
	touch $(LAB_STAMP)

$(TEST_STAMP): $(LAB_STAMP)
	$(BIN)/python -m pip install --progress-bar on -e '.[course,test]'
	touch $(TEST_STAMP)

install: $(LAB_STAMP)
install-test: $(TEST_STAMP)

data: install
	$(BIN)/python -m ddp_lessons make-vqa-data

# JupyterLab refuses to run as root unless told; containers and lent machines often are root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: install data
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=$(CURDIR) $(ROOT_FLAG) \
	  --LabApp.default_url=/lab/tree/notebooks/00_first_launch.ipynb

browser-deps:
	@test -x /usr/bin/chromium || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

lint: install-test
	$(BIN)/python -m ruff check src tests scripts benchmarks notebooks/src
	$(BIN)/python -m mypy

# Tests and notebooks in two processes (--dist loadfile keeps a notebook's cells in one kernel, in order).
# A notebook's compared verdicts must come out as stored on a loaded machine: `make verdicts HOG=2` checks.
test: install-test browser-deps lint
	$(BIN)/python -m pytest -n 2 --dist loadfile $(NBVAL) tests notebooks

unit: install-test
	$(BIN)/python -m pytest -n 2 tests --ignore=tests/repo/test_browser.py

# While editing: the unit tests without the slow multi-process ones (`make test` runs them all).
quick: install-test
	$(BIN)/python -m pytest -n 2 tests --ignore=tests/repo/test_browser.py -m "not slow"

nbval: install-test
	$(BIN)/python -m pytest $(NBVAL) notebooks

# The torchrun exit race, 20 runs in a row (`make test` runs the loop twice).
stress: install-test
	DDP_LESSONS_STRESS_RUNS=20 $(BIN)/python -m pytest tests/tool/test_torchrun_stress.py

# Every verdict of the notebooks, RUNS times (HOG busy processes beside them): does any come out
# otherwise than stored? Appends to data/runs/verdict-stability-cpu2.json (RECORD=... for another).
RUNS   ?= 1
HOG    ?= 0
RECORD ?= verdict-stability-cpu2
verdicts: install-test
	$(BIN)/python scripts/verdict_stability.py --runs $(RUNS) --hog $(HOG) --record $(RECORD) $(addprefix --only ,$(NB))

# The only way reference outputs are made: execute every notebook from its source.
notebooks: install-test
	$(BIN)/python scripts/notebooks.py build $(NB)

check-notebooks: install-test
	$(BIN)/python scripts/notebooks.py check

clean:
	rm -rf $(VENV) data/vqa*
