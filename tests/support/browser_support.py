"""JupyterLab and Chromium for tests/repo/test_browser.py.

`LabServer` runs JupyterLab on 127.0.0.1 from throwaway config, settings,
workspace, runtime and kernelspec directories; `open_browser` starts Debian's
Chromium through Playwright; `NotebookPage` drives one notebook tab and reads
its state. No network access beyond 127.0.0.1 is needed or attempted.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]
SERVER_READY_TIMEOUT_S = 60
POLL_S = 0.25
OUTPUT_CHANGE_S = 5

# Settings written to the temporary user settings dir. Autosave is off so that
# running a notebook in the browser never rewrites the file in the repository;
# windowing is off so that every cell stays in the DOM while we count them.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}
# `--LabApp.news_url=` on the command line gives "", which is not None and still
# turns the news feed on: None has to come from a config file.
SERVER_CONFIG = {"LabApp": {"news_url": None}}


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


class LabServer:
    """A JupyterLab server in its own session (process group), run from `tmp`."""

    def __init__(self, root_dir: Path, tmp: Path):
        self.root_dir, self.tmp = Path(root_dir).resolve(), Path(tmp)
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.ready_s: float | None = None
        self.log_path = self.tmp / "jupyterlab.log"
        cookies = http.cookiejar.CookieJar()
        # ProxyHandler({}): never send requests for 127.0.0.1 through a proxy.
        self._http = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPCookieProcessor(cookies))
        self._cookies = cookies

    def _prepare(self) -> dict:
        t = self.tmp
        for name, values in LAB_SETTINGS.items():
            _write_json(t / "settings" / f"{name}.jupyterlab-settings", values)
        _write_json(t / "config" / "jupyter_server_config.json", SERVER_CONFIG)
        # The kernel is the project's environment: the interpreter running pytest.
        _write_json(t / "data" / "kernels" / "python3" / "kernel.json", {
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)", "language": "python"})
        (t / "workspaces").mkdir(exist_ok=True)
        # Nothing of pytest's or of the caller's Jupyter setup reaches the server
        # or its kernels; DDP_LESSONS_PROGRESS is left unset: the live progress
        # display is what a learner sees in the browser.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYTEST_", "JUPYTER_")) and k != "DDP_LESSONS_PROGRESS"}
        env.update(JUPYTER_CONFIG_DIR=str(t / "config"), JUPYTER_DATA_DIR=str(t / "data"),
                   JUPYTER_PATH=str(t / "data"), JUPYTER_RUNTIME_DIR=str(t / "runtime"),
                   IPYTHONDIR=str(t / "ipython"))
        return env

    def command(self) -> list[str]:
        t = self.tmp
        return [
            sys.executable, "-m", "jupyterlab", "--no-browser",
            "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0", "--ServerApp.port_retries=0",
            "--IdentityProvider.token=", "--PasswordIdentityProvider.hashed_password=",
            "--ServerApp.allow_root=True", f"--ServerApp.root_dir={self.root_dir}",
            f"--LabApp.user_settings_dir={t / 'settings'}",
            f"--LabApp.workspaces_dir={t / 'workspaces'}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            # window.jupyterapp: the notebook model tells an error output from a
            # warning, which the DOM does not (both render as stderr).
            "--LabApp.expose_app_in_browser=True",
        ]

    def start(self) -> None:
        env = self._prepare()
        t0 = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.command(), env=env, cwd=self.tmp, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready(t0)

    def log_tail(self, n: int = 40) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines() if self.log_path.exists() else []
        return "\n".join(lines[-n:])

    def _wait_ready(self, t0: float) -> None:
        # Port 0: the server picks a free port and writes it to its runtime file.
        info = self.tmp / "runtime" / f"jpserver-{self.proc.pid}.json"
        while time.monotonic() - t0 < SERVER_READY_TIMEOUT_S:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self.port is None and info.exists():
                try:
                    self.port = json.loads(info.read_text())["port"]
                except (ValueError, KeyError):
                    pass  # the file is being written
            if self.port is not None:
                try:
                    self.request("GET", "/api/status")
                    self.request("GET", "/lab")  # sets the _xsrf cookie for later API calls
                    self.ready_s = time.monotonic() - t0
                    return
                except OSError:
                    pass
            time.sleep(POLL_S)
        raise RuntimeError(f"JupyterLab did not answer within {SERVER_READY_TIMEOUT_S} s:\n{self.log_tail()}")

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def request(self, method: str, path: str, timeout: float = 10):
        req = urllib.request.Request(self.url(path), method=method)
        xsrf = next((c.value for c in self._cookies if c.name == "_xsrf"), None)
        if xsrf:
            req.add_header("X-XSRFToken", xsrf)
        with self._http.open(req, timeout=timeout) as resp:
            body = resp.read()
        return json.loads(body) if body and path.startswith("/api") else None

    def shutdown_kernels(self) -> None:
        for kernel in self.request("GET", "/api/kernels"):
            self.request("DELETE", f"/api/kernels/{kernel['id']}", timeout=30)

    def end_session(self, session_id: str, kernel_id: str | None) -> list[str]:
        """Close a notebook's session; return what its kernel left running (killed now)."""
        procs = []
        for p in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                if kernel_id and any(f"kernel-{kernel_id}" in a for a in p.cmdline()):
                    procs = [p] + p.children(recursive=True)
            except psutil.NoSuchProcess:
                pass
        self.request("DELETE", f"/api/sessions/{session_id}", timeout=30)
        # A kernel's workers outlive it as orphans, out of reach of the server.
        return _reap(procs)

    def stop(self) -> list[str]:
        """Stop kernels, then the server's process group; return what survived."""
        if self.proc is None:
            return []
        try:
            procs = [psutil.Process(self.proc.pid)] + psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            procs = []
        if self.proc.poll() is None and self.port is not None:
            try:
                self.shutdown_kernels()
            except OSError:
                pass  # the group is killed below anyway
        _kill_group(self.proc)
        # Kernels run in sessions of their own, so the group kill misses them;
        # anything of the snapshot still alive is killed here and reported.
        return _reap(procs)


def describe(procs: list[psutil.Process]) -> list[str]:
    out = []
    for p in procs:
        try:
            out.append(f"pid {p.pid}: {' '.join(p.cmdline())[:200]}")
        except psutil.Error:
            pass  # gone meanwhile
    return out


def _reap(procs: list[psutil.Process], wait_s: float = 5) -> list[str]:
    """Wait for `procs` to end; kill and describe those that do not."""
    _, alive = psutil.wait_procs(procs, timeout=wait_s)
    found = describe(alive)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    return found


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait_s)
            break
        except subprocess.TimeoutExpired:
            continue


def processes_mentioning(text: str) -> list[psutil.Process]:
    """Processes whose command line names `text` (a temporary directory)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if any(text in arg for arg in p.info["cmdline"] or []):
            found.append(p)
    return found


def listening_on(port: int) -> list:
    return [c for c in psutil.net_connections(kind="tcp")
            if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN]


def open_browser(tmp: Path):
    """Start Chromium with a new profile in `tmp`; return (playwright, context)."""
    from playwright.sync_api import sync_playwright

    # Chromium's crash handler keeps its database under $XDG_CONFIG_HOME, not
    # under the profile: point it into `tmp` too, away from the user's home.
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp / "config"), XDG_CACHE_HOME=str(tmp / "cache"))
    playwright = sync_playwright().start()
    try:
        context = playwright.chromium.launch_persistent_context(
            str(tmp / "profile"), executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True,
            env=env, viewport={"width": 1400, "height": 1000})
    except Exception:
        playwright.stop()
        raise
    return playwright, context


def stored_image_counts(path: Path) -> dict[int, int]:
    """Image outputs stored in each code cell, by cell index."""
    cells = json.loads(Path(path).read_text())["cells"]
    counts = {i: sum("image/png" in o.get("data", {}) or "image/jpeg" in o.get("data", {})
                     for o in c.get("outputs", []))
              for i, c in enumerate(cells) if c["cell_type"] == "code"}
    return {i: n for i, n in counts.items() if n}


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


# One snapshot of the open notebook: the kernel from the app's session, each
# cell's prompt, images and controls from the DOM, and its error outputs from
# the notebook model (in the DOM an error and a warning are the same
# `.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]`). Inside
# a widget Output (interact) there is no model to ask: a stderr block holding a
# Python traceback counts as an error there.
STATE_JS = """() => {
  const app = window.jupyterapp, panel = app && app.shell.currentWidget;
  if (!panel || !panel.content || !panel.sessionContext) return null;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  const dialog = document.querySelector('.jp-Dialog');
  const cells = panel.content.widgets.map((cell) => {
    const m = cell.model, out = cell.node.querySelector('.jp-Cell-outputArea');
    const prompt = cell.node.querySelector('.jp-InputPrompt');
    const q = (sel) => out ? Array.from(out.querySelectorAll(sel)) : [];
    const children = q(':scope > .jp-OutputArea-child');  // one per output of the model
    const errors = [];
    let widgetsAsText = 0;
    if (m.type === 'code') for (let j = 0; j < m.outputs.length; j++) {
      const o = m.outputs.get(j).toJSON();
      if (o.output_type === 'error') errors.push(o.ename + ': ' + o.evalue + '\\n' + o.traceback.join('\\n'));
      // The widget renderer's node has no data-mime-type; the text/plain
      // fallback (no widget manager in the page) has one.
      const shown = children[j] && children[j].querySelector('.jp-OutputArea-output');
      if (o.data && o.data['application/vnd.jupyter.widget-view+json'] && shown
          && shown.hasAttribute('data-mime-type')) widgetsAsText += 1;
    }
    const imgs = q('img');
    return {
      type: m.type, source: m.sharedModel.getSource(), tags: m.getMetadata('tags') || [],
      prompt: prompt ? prompt.textContent.trim() : '', errors,
      widgetErrors: q('.widget-output [data-mime-type="application/vnd.jupyter.stderr"]')
        .map((e) => e.innerText).filter((t) => /Traceback \\(most recent call last\\)/.test(t)),
      // A widget closed by the kernel (ddp_lessons' progress display) hides
      // its output: not a problem.
      widgetsAsText, widgetLoading: out ? out.innerText.includes('Loading widget...') : false,
      widgetProblem: out ? (out.innerText.match(/Error displaying widget[^\\n]*/) || [null])[0] : null,
      images: imgs.filter((i) => i.complete && i.naturalWidth > 0).length,
      loadingImages: imgs.filter((i) => !i.complete).length,
      brokenImages: imgs.filter((i) => i.complete && i.naturalWidth === 0).length,
      sliders: q('.widget-slider').length, dropdowns: q('.widget-dropdown select').length,
    };
  });
  return {kernel: kernel ? kernel.status : null, connection: kernel ? kernel.connectionStatus : null,
          sessionId: panel.sessionContext.session ? panel.sessionContext.session.id : null,
          kernelId: kernel ? kernel.id : null,
          dialog: dialog ? dialog.innerText : null, cells};
}"""

# What a control drives, as seen in its cell: images, tables, widget Output text.
SIGNATURE_JS = """(cell) => {
  const out = cell.querySelector('.jp-Cell-outputArea');
  if (!out) return '';
  const parts = [];
  out.querySelectorAll('img').forEach((i) => parts.push('img:' + i.src));
  out.querySelectorAll('table').forEach((t) => parts.push('table:' + t.innerText));
  out.querySelectorAll('.widget-output').forEach((w) => parts.push('output:' + w.innerText));
  return parts.join('\\n');
}"""

BUSY_COUNTER_JS = """() => {
  window.__ddpBusy = 0;
  window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.statusChanged.connect(
    (_, status) => { if (status === 'busy') window.__ddpBusy += 1; });
}"""

DEAD_KERNEL = {"dead", "autorestarting", "restarting"}
COUNT = re.compile(r"^\[\d+\]:$")


def cell_label(index: int, cell: dict) -> str:
    first = next((line for line in cell["source"].splitlines() if line.strip()), "")
    return f"cell {index} ({first[:60]!r})"


def expects_error(cell: dict) -> bool:
    # JupyterLab's Run All goes on past a failing cell only with this tag.
    return "raises-exception" in cell["tags"]


class NotebookPage:
    """One notebook open in its own tab."""

    def __init__(self, context, url: str):
        self.page = context.new_page()
        self.url = url

    def state(self) -> dict | None:
        return self.page.evaluate(STATE_JS)

    def wait(self, what: str, ready, timeout_s: float, describe=lambda s: "", required=True):
        """Poll `ready(state)` until true; on timeout fail with `what` and
        `describe(state)`, or return None when not `required`."""
        deadline, state = time.monotonic() + timeout_s, None
        while time.monotonic() < deadline:
            state = self.state()
            if state and state["dialog"]:
                raise AssertionError(f"{what}: JupyterLab shows a dialog: {state['dialog']!r}")
            if state and state["kernel"] in DEAD_KERNEL:
                raise AssertionError(f"{what}: the kernel is {state['kernel']}")
            if state and ready(state):
                return state
            time.sleep(POLL_S)
        if not required:
            return None
        detail = describe(state) if state else f"No notebook panel in the page (at {self.page.url})."
        raise AssertionError(f"{what}: not done after {timeout_s:.0f} s. {detail}")

    def open(self, timeout_s: float = 60) -> dict:
        # ?reset: start from an empty workspace, not the previous notebook's tabs.
        self.page.goto(self.url + "?reset")
        state = self.wait("opening the notebook and starting its kernel",
                          lambda s: s["kernel"] == "idle" and s["connection"] == "connected" and s["cells"],
                          timeout_s, lambda s: f"kernel {s['kernel']}, connection {s['connection']}")
        # Count the kernel's busy spells: each change of a control is one.
        self.page.evaluate(BUSY_COUNTER_JS)
        return state

    def append_to_first_cell(self, text: str) -> None:
        """Type `text` at the end of the first cell, as a learner does: Enter to edit, type, Escape."""
        cell = self.cell(0)
        cell.click()
        self.page.keyboard.press("Enter")
        self.page.keyboard.press("Control+End")
        self.page.keyboard.type("\n" + text)
        self.page.keyboard.press("Escape")

    def save(self) -> None:
        self.page.keyboard.press("Control+s")

    def busy_count(self) -> int:
        return self.page.evaluate("() => window.__ddpBusy")

    def menu(self, menu: str, item: str) -> None:
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()

    def run_all(self, timeout_s: float) -> dict:
        """Clear the stored outputs, Run > Run All Cells, wait for the end."""
        self.menu("Edit", "Clear Outputs of All Cells")
        self.wait("clearing the stored outputs",
                  lambda s: all(not COUNT.match(c["prompt"]) and not c["images"] for c in s["cells"]), 10)
        self.menu("Run", "Run All Cells")
        return self.wait("running all cells", _run_finished, timeout_s, _pending_cells)

    def settle(self, timeout_s: float = 15) -> dict:
        """Wait until images have loaded, widgets have rendered and nothing moves."""
        last = None

        def still(s):
            nonlocal last
            same, last = s == last, s
            return same and not _unsettled(s)
        return self.wait("rendering the outputs", still, timeout_s, _unsettled)

    def cell(self, index: int):
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def signature(self, index: int) -> str:
        return self.cell(index).evaluate(SIGNATURE_JS)

    def controls(self, index: int) -> list[tuple[str, object]]:
        """(description, locator) of every enabled slider and dropdown in a cell."""
        cell, found = self.cell(index), []
        sliders = cell.locator(".widget-slider")
        for k in range(sliders.count()):
            handle = sliders.nth(k).locator(".noUi-handle").first
            if sliders.nth(k).locator(".noUi-target[disabled]").count() == 0:
                found.append((f"slider {_label(sliders.nth(k))}", handle))
        dropdowns = cell.locator(".widget-dropdown")
        for k in range(dropdowns.count()):
            select = dropdowns.nth(k).locator("select")
            if select.is_enabled() and select.locator("option").count() > 1:
                found.append((f"dropdown {_label(dropdowns.nth(k))}", select))
        return found

    def change(self, control) -> tuple[str, str | None]:
        """Move a slider one step with the keyboard, or pick another option."""
        if control.evaluate("(e) => e.tagName") == "SELECT":
            before = control.evaluate("(e) => e.selectedIndex")
            control.select_option(index=0 if before else 1)
            return (control.evaluate("(e) => e.options[%d].text" % before),
                    control.evaluate("(e) => e.options[e.selectedIndex].text"))

        def value():
            return control.get_attribute("aria-valuetext") or control.get_attribute("aria-valuenow")
        before = value()
        # At either end one direction does nothing; vertical sliders use up/down.
        for key in ("ArrowRight", "ArrowLeft", "ArrowUp", "ArrowDown"):
            control.focus()
            control.press(key)
            if value() != before:
                return before, value()
        return before, None

    def exercise(self, index: int, timeout_s: float) -> list[str]:
        """Change each control of a cell; the cell's output must follow."""
        problems = []
        for what, control in self.controls(index):
            try:
                problems += self._exercise_one(index, what, control, timeout_s)
            except AssertionError as e:
                problems.append(f"{what}: {e}")
        return problems

    def _exercise_one(self, index: int, what: str, control, timeout_s: float) -> list[str]:
        self.settle()
        before, busy = self.signature(index), self.busy_count()
        old, new = self.change(control)
        if new is None:
            return [f"{what}: the keyboard did not move it from {old}"]
        # The kernel runs the callback (up to timeout_s), then the new output
        # has a few seconds to show up.
        self.wait(f"the kernel handling {what} {old} -> {new}",
                  lambda s: s["kernel"] == "idle" and self.busy_count() > busy, timeout_s)
        changed = self.wait("a new output", lambda s: self._changed(index, before), OUTPUT_CHANGE_S,
                            required=False)
        state = self.settle()
        if not changed or self.signature(index) == before:
            return [f"{what}: {old} -> {new} left the cell's output (images, tables, text) as it was, "
                    f"{OUTPUT_CHANGE_S} s after the kernel had handled it"]
        cell = state["cells"][index]
        return [f"{what} {old} -> {new} raised:\n{strip_ansi(t)}" for t in cell["widgetErrors"] + cell["errors"]]

    def _changed(self, index: int, before: str) -> bool:
        # Changed, and not just cleared: interact empties its Output first.
        now = self.signature(index)
        return now != before and (bool(now) or not before)


def _unsettled(s: dict) -> str:
    """What is still loading, in words ('' when nothing is)."""
    why = [] if s["kernel"] == "idle" else [f"kernel {s['kernel']}"]
    for i, c in enumerate(s["cells"]):
        if c["loadingImages"]:
            why.append(f"{cell_label(i, c)}: {c['loadingImages']} image(s) loading")
        if c["widgetLoading"]:
            why.append(f"{cell_label(i, c)}: 'Loading widget...'")
    return "; ".join(why)


def _label(widget) -> str:
    label = widget.locator(".widget-label")
    return repr(label.first.inner_text()) if label.count() else "(no label)"


def _run_finished(s: dict) -> bool:
    if s["kernel"] != "idle":
        return False
    code = [c for c in s["cells"] if c["type"] == "code" and c["source"].strip()]
    if any(c["prompt"] == "[*]:" for c in code):
        return False
    stopped = any(c["errors"] and not expects_error(c) for c in code)
    return stopped or all(COUNT.match(c["prompt"]) for c in code)


def _pending_cells(s: dict) -> str:
    # Run All executes in order: the first [*] cell is the one running.
    waiting = [(i, c) for i, c in enumerate(s["cells"])
               if c["type"] == "code" and c["source"].strip() and not COUNT.match(c["prompt"])]
    running = [cell_label(i, c) for i, c in waiting if c["prompt"] == "[*]:"][:1]
    return (f"Kernel {s['kernel']}; still running: {', '.join(running) or 'none'}; "
            f"cells without an execution count: {[i for i, _ in waiting]}")


def images_loaded(s: dict) -> bool:
    return all(not c["loadingImages"] for c in s["cells"])


def describe_loading(s: dict) -> str:
    return "; ".join(f"{cell_label(i, c)}: {c['loadingImages']} image(s) loading"
                     for i, c in enumerate(s["cells"]) if c["loadingImages"])


class Timings:
    """Collects durations and prints them in pytest's terminal summary."""

    name = "ddp-lessons-browser-timings"

    def __init__(self):
        self.rows: list[tuple[str, str]] = []

    def add(self, what: str, text: str) -> None:
        self.rows.append((what, text))

    def pytest_sessionfinish(self, session) -> None:
        # under pytest-xdist this process is a worker: its rows go to the controller, which prints them
        if hasattr(session.config, "workeroutput"):
            session.config.workeroutput[self.name] = self.rows

    def pytest_terminal_summary(self, terminalreporter) -> None:
        show_timings(terminalreporter, self.rows)


def show_timings(terminalreporter, rows) -> None:
    if rows:
        terminalreporter.section("browser test timings")
        for what, text in rows:
            terminalreporter.write_line(f"{what}: {text}")
