"""The course in a real browser: notebooks opened and run in JupyterLab by Chromium.

The notebooks named in $DDP_LESSONS_BROWSER_RUN (comma-separated, or "all";
default 00_first_launch; from notebooks/ or $DDP_LESSONS_BROWSER_NOTEBOOKS)
are opened (the stored outputs render: plots drawn, no error, no dialog such
as jupytext's refusal of a pair out of step) and run: Run All Cells, then no
cell may raise, the plots are drawn again, and every slider and dropdown
changes its cell's output. $DDP_LESSONS_BROWSER_OPEN=all also opens every
other notebook and checks its stored outputs render. nbval executes every
notebook and compares every output, and tests/repo/test_notebooks.py checks every
stored output statically (no error, every image decodes, the pair in step);
doing it all here too would add minutes for what one notebook shows (the
kernel, the widget manager and the launcher work in a real JupyterLab). A
screenshot per notebook goes to artifacts/browser/NAME.png.

`test_saving_a_notebook_updates_its_source` edits a cell of a copy of
notebook 00 in the browser, saves it, and checks that jupytext updated its
paired source and left the stored outputs alone.

Needs Debian's Chromium at /usr/bin/chromium (`apt-get install -y chromium`):
without it the tests are skipped, unless CI is set, where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import psutil
import pytest

try:
    from . import browser_support as bs
except ImportError:  # tests/support is on sys.path (tests/conftest.py)
    import browser_support as bs

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = Path(os.environ.get("DDP_LESSONS_BROWSER_NOTEBOOKS", REPO / "notebooks")).resolve()
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
RUN = os.environ.get("DDP_LESSONS_BROWSER_RUN", "00_first_launch")
RUN_NAMES = {p.stem for p in NOTEBOOKS} if RUN == "all" else {n.strip() for n in RUN.split(",") if n.strip()}
# JupyterLab serves the repository; a directory elsewhere is served itself.
ROOT_DIR = REPO if NOTEBOOK_DIR.is_relative_to(REPO) else NOTEBOOK_DIR
ARTIFACTS = REPO / "artifacts" / "browser"
RUN_TIMEOUT_S = float(os.environ.get("DDP_LESSONS_BROWSER_TIMEOUT", 180))  # per notebook
CONTROL_TIMEOUT_S = 60
CLEANUP_GRACE_S = 3

OPENED = [p for p in NOTEBOOKS if os.environ.get("DDP_LESSONS_BROWSER_OPEN") == "all" or p.stem in RUN_NAMES]
PARAMS = [pytest.param(p, id=p.stem) for p in OPENED] or [
    pytest.param(None, id="none", marks=pytest.mark.skip(reason=f"no notebooks in {NOTEBOOK_DIR}"))]


def _require_browser() -> None:
    missing = None
    if not bs.CHROMIUM.exists():
        missing = f"{bs.CHROMIUM} is missing (apt-get install -y chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "playwright (python) is not installed (pip install -e .[test])"
    if missing and os.environ.get("CI"):
        pytest.fail(f"{missing}; CI is set, so the browser test must run")
    if missing:
        pytest.skip(missing)


def _new_children(before: set[int]) -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if p.pid not in before]


@pytest.fixture(scope="module")
def timings(request):
    plugins = request.config.pluginmanager
    plugin = plugins.get_plugin(bs.Timings.name) or bs.Timings()
    if not plugins.is_registered(plugin):
        plugins.register(plugin, bs.Timings.name)
    return plugin


@pytest.fixture(scope="module")
def lab(tmp_path_factory, timings):
    """(server, browser context); both stopped afterwards, and checked gone."""
    _require_browser()
    t0, before = time.monotonic(), {p.pid for p in psutil.Process().children(recursive=True)}
    tmp = tmp_path_factory.mktemp("browser")
    (tmp / "jupyterlab").mkdir()
    server = bs.LabServer(ROOT_DIR, tmp / "jupyterlab")
    survivors, playwright = [], None
    try:
        server.start()
        timings.add("JupyterLab answered /api/status after", f"{server.ready_s:.1f} s")
        playwright, context = bs.open_browser(tmp / "chromium")
        yield server, context
    finally:
        if playwright is not None:
            try:
                context.close()
            finally:
                playwright.stop()
        survivors = server.stop()
        deadline = time.monotonic() + CLEANUP_GRACE_S
        while (_new_children(before) or bs.processes_mentioning(str(tmp))) and time.monotonic() < deadline:
            time.sleep(0.1)
        timings.add("whole browser test (server, browser, all notebooks, cleanup)",
                    f"{time.monotonic() - t0:.1f} s")
    assert not survivors, f"still running after the server stopped (killed now): {survivors}"
    assert not _new_children(before), f"child processes left: {bs.describe(_new_children(before))}"
    left = bs.processes_mentioning(str(tmp))
    assert not left, f"processes left that use {tmp}: {bs.describe(left)}"
    assert server.port is None or not bs.listening_on(server.port), f"port {server.port} still listening"


def _output_problems(state: dict, stored_images: dict[int, int], ran: bool = True) -> list[str]:
    problems = []
    for i, cell in enumerate(state["cells"]):
        if not ran:  # stored outputs: a widget needs its kernel, so only errors and images count
            cell = dict(cell, widgetsAsText=0, widgetProblem=None)
        where = bs.cell_label(i, cell)
        if cell["errors"] and not bs.expects_error(cell):
            hint = ("\n  (the NBVAL_RAISES_EXCEPTION comment does not let JupyterLab's Run All go on: "
                    "tag the cell raises-exception)") if "NBVAL_RAISES_EXCEPTION" in cell["source"] else ""
            tail = "\n".join(bs.strip_ansi(cell["errors"][0]).splitlines()[-12:])
            problems.append(f"{where} raised:\n{tail}{hint}")
        problems += [f"{where}: a widget's output shows a traceback:\n{bs.strip_ansi(t)}"
                     for t in cell["widgetErrors"]]
        if cell["widgetProblem"]:
            problems.append(f"{where}: {cell['widgetProblem']}")
        if cell["widgetsAsText"]:
            problems.append(f"{where}: a widget is shown as text, not drawn (no widget manager in JupyterLab?)")
        if cell["brokenImages"]:
            problems.append(f"{where}: {cell['brokenImages']} image(s) failed to load")
        if stored_images.get(i) and not cell["images"]:
            problems.append(f"{where}: the stored notebook has {stored_images[i]} image(s), "
                            "the browser drew none")
    return problems


def _screenshot(page: bs.NotebookPage, name: str) -> None:
    """The whole notebook: grow the viewport to its height for one shot."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = page.page.evaluate(SCROLL_TOP_JS)
    page.page.set_viewport_size({"width": 1400, "height": max(1000, min(height, 16000))})
    page.page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


# Scroll the notebook to its top; return the page height that shows it all
# (down to the last cell, plus the status bar).
SCROLL_TOP_JS = """() => {
  const outer = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
  const cells = outer ? outer.querySelectorAll('.jp-Cell') : [];
  if (!cells.length) return 0;
  outer.scrollTop = 0;
  return Math.ceil(cells[cells.length - 1].getBoundingClientRect().bottom + 60);
}"""


@pytest.mark.parametrize("notebook", PARAMS)
def test_notebook_in_jupyterlab(notebook: Path, lab, timings):
    server, context = lab
    original = notebook.read_bytes()
    page = bs.NotebookPage(context, server.url(f"lab/tree/{notebook.relative_to(ROOT_DIR).as_posix()}"))
    t0, times, opened, survivors = time.monotonic(), {}, None, []
    run = notebook.stem in RUN_NAMES
    try:
        try:
            opened = page.open()
            times["open"] = time.monotonic() - t0
            if run:
                page.run_all(RUN_TIMEOUT_S)
                times["run all"] = time.monotonic() - t0 - times["open"]
                state = page.settle()
            else:  # the stored outputs as a reader first sees them
                state = page.wait("rendering the stored outputs", bs.images_loaded, 30, bs.describe_loading)
        except AssertionError as e:
            failure = f"{notebook.name} in JupyterLab: {e}"
        else:
            failure = None
        if failure:  # outside the except: no "during handling" chain in the report
            pytest.fail(failure, pytrace=False)
        problems = _output_problems(state, bs.stored_image_counts(notebook), ran=run)
        t1 = time.monotonic()
        for i, cell in enumerate(state["cells"] if run else []):  # a control needs the kernel's state
            if cell["sliders"] or cell["dropdowns"]:
                problems += [f"{bs.cell_label(i, cell)}: {p}" for p in page.exercise(i, CONTROL_TIMEOUT_S)]
        times["controls"] = time.monotonic() - t1
        if problems:
            pytest.fail(f"{notebook.name} in JupyterLab:\n" + "\n".join(problems), pytrace=False)
    finally:
        try:
            _screenshot(page, notebook.stem)
        finally:
            page.page.close()
            if opened:
                survivors = server.end_session(opened["sessionId"], opened["kernelId"])
            times["total"] = time.monotonic() - t0
            timings.add(notebook.name, ", ".join(f"{k} {v:.1f} s" for k, v in times.items()))
    assert not survivors, f"still running after the kernel was shut down (killed now): {survivors}"
    assert notebook.read_bytes() == original, f"{notebook} was modified by the browser run"


MARK = "Edited in the browser: saving updates the paired source."


def _outputs(path: Path) -> list:
    return [c.get("outputs") for c in json.loads(path.read_text())["cells"]]


def test_saving_a_notebook_updates_its_source(tmp_path_factory, lab, timings):
    """A learner's edit, made in JupyterLab served from the repository root as `make lab`
    serves it (a copy: pyproject.toml's jupytext pairing and one notebook with its source),
    reaches notebooks/src/ on save; the stored outputs stay as they were."""
    _, context = lab  # one Playwright per process: the module's browser, a server of this test's own
    name = "00_first_launch"
    repo = tmp_path_factory.mktemp("repo")
    (repo / "notebooks" / "src").mkdir(parents=True)
    shutil.copy2(REPO / "pyproject.toml", repo / "pyproject.toml")
    shutil.copy2(REPO / "notebooks" / f"{name}.ipynb", repo / "notebooks" / f"{name}.ipynb")
    shutil.copy2(REPO / "notebooks" / "src" / f"{name}.py", repo / "notebooks" / "src" / f"{name}.py")
    ipynb, source = repo / "notebooks" / f"{name}.ipynb", repo / "notebooks" / "src" / f"{name}.py"
    outputs_before = _outputs(ipynb)
    tmp = tmp_path_factory.mktemp("browser-save")
    (tmp / "jupyterlab").mkdir()
    server = bs.LabServer(repo, tmp / "jupyterlab")
    page, opened = None, None
    t0 = time.monotonic()
    try:
        server.start()
        page = bs.NotebookPage(context, server.url(f"lab/tree/notebooks/{name}.ipynb"))
        opened = page.open()
        page.append_to_first_cell(MARK)
        page.save()
        deadline = time.monotonic() + 20
        while MARK not in source.read_text() and time.monotonic() < deadline:
            time.sleep(0.25)
        assert MARK in source.read_text(), f"saving {name}.ipynb left notebooks/src/{name}.py unchanged"
        assert MARK in ipynb.read_text(), f"saving did not write {name}.ipynb"
        assert _outputs(ipynb) == outputs_before, "saving changed the stored outputs"
    finally:
        if page is not None:
            page.page.close()
            if opened:
                server.end_session(opened["sessionId"], opened["kernelId"])
        survivors = server.stop()
        timings.add("edit and save in the browser", f"{time.monotonic() - t0:.1f} s")
    assert not survivors, f"still running after the server stopped (killed now): {survivors}"
