"""JupyterLab and Chromium for tests/test_browser.py.

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
        self.root_dir, self.tmp = Path(root_dir), Path(tmp)
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

    def stop(self) -> list[psutil.Process]:
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
        _, alive = psutil.wait_procs(procs, timeout=5)
        for p in alive:
            p.kill()
        return alive


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


def listening_on(port: int) -> list:
    return [c for c in psutil.net_connections(kind="tcp")
            if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN]


def open_browser(tmp: Path):
    """Start Chromium with a new profile in `tmp`; return (playwright, context)."""
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        context = playwright.chromium.launch_persistent_context(
            str(tmp), executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True,
            viewport={"width": 1400, "height": 1000})
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
    const errors = [];
    let widgetViews = 0;
    if (m.type === 'code') for (let j = 0; j < m.outputs.length; j++) {
      const o = m.outputs.get(j).toJSON();
      if (o.output_type === 'error') errors.push(o.ename + ': ' + o.evalue + '\\n' + o.traceback.join('\\n'));
      if (o.data && o.data['application/vnd.jupyter.widget-view+json']) widgetViews += 1;
    }
    const q = (sel) => out ? Array.from(out.querySelectorAll(sel)) : [];
    const imgs = q('img');
    return {
      type: m.type, source: m.sharedModel.getSource(), tags: m.getMetadata('tags') || [],
      prompt: prompt ? prompt.textContent.trim() : '', errors,
      widgetErrors: q('.widget-output [data-mime-type="application/vnd.jupyter.stderr"]')
        .map((e) => e.innerText).filter((t) => /Traceback \\(most recent call last\\)/.test(t)),
      widgetViews, widgetsRendered: q('.jupyter-widgets').length,
      widgetProblem: out ? (out.innerText.match(/Error displaying widget[^\\n]*/) || [null])[0] : null,
      images: imgs.filter((i) => i.complete && i.naturalWidth > 0).length,
      loadingImages: imgs.filter((i) => !i.complete).length,
      brokenImages: imgs.filter((i) => i.complete && i.naturalWidth === 0).length,
      sliders: q('.widget-slider').length, dropdowns: q('.widget-dropdown select').length,
    };
  });
  return {kernel: kernel ? kernel.status : null, connection: kernel ? kernel.connectionStatus : null,
          sessionId: panel.sessionContext.session ? panel.sessionContext.session.id : null,
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
        self.console: list[str] = []
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))

    def state(self) -> dict | None:
        return self.page.evaluate(STATE_JS)

    def wait(self, what: str, ready, timeout_s: float, describe=lambda s: ""):
        """Poll `ready(state)` until true; fail with `what` and `describe(state)`."""
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
        raise AssertionError(f"{what}: not done after {timeout_s:.0f} s. {describe(state) if state else ''}")

    def open(self, timeout_s: float = 60) -> dict:
        # ?reset: start from an empty workspace, not the previous notebook's tabs.
        self.page.goto(self.url + "?reset")
        return self.wait("opening the notebook and starting its kernel",
                         lambda s: s["kernel"] == "idle" and s["connection"] == "connected" and s["cells"],
                         timeout_s, lambda s: f"kernel {s['kernel']}, connection {s['connection']}")

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
        """Wait until images have loaded, widgets rendered and nothing moves."""
        last = None

        def still(s):
            nonlocal last
            done = s["kernel"] == "idle" and all(
                not c["loadingImages"] and (not c["widgetViews"] or c["widgetsRendered"] or c["widgetProblem"])
                for c in s["cells"])
            same, last = s == last, s
            return done and same
        return self.wait("rendering the outputs", still, timeout_s)

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
        before = control.get_attribute("aria-valuenow")
        # At either end one direction does nothing; vertical sliders use up/down.
        for key in ("ArrowRight", "ArrowLeft", "ArrowUp", "ArrowDown"):
            control.focus()
            control.press(key)
            after = control.get_attribute("aria-valuenow")
            if after != before:
                return before, after
        return before, None

    def exercise(self, index: int, timeout_s: float) -> list[str]:
        """Change each control of a cell; the cell's output must follow."""
        problems = []
        for what, control in self.controls(index):
            self.settle()
            before = self.signature(index)
            old, new = self.change(control)
            if new is None:
                problems.append(f"{what}: the keyboard did not move it from {old}")
                continue
            try:
                self.wait(f"{what} {old} -> {new}",
                          lambda s: s["kernel"] == "idle" and self._changed(index, before), timeout_s)
                state = self.settle()
                assert self.signature(index) != before, "it changed back"
            except AssertionError as e:
                problems.append(f"{what}: changing {old} -> {new} did not change the cell's "
                                f"output (images, tables, text): {e}")
                continue
            cell = state["cells"][index]
            problems += [f"{what} {old} -> {new} raised:\n{strip_ansi(t)}" for t in cell["widgetErrors"]]
            problems += [f"{what} {old} -> {new} raised:\n{strip_ansi(t)}" for t in cell["errors"]]
        return problems

    def _changed(self, index: int, before: str) -> bool:
        # Changed, and not just cleared: interact empties its Output first.
        now = self.signature(index)
        return now != before and (bool(now) or not before)


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
    waiting = [cell_label(i, c) + " " + c["prompt"] for i, c in enumerate(s["cells"])
               if c["type"] == "code" and c["source"].strip() and not COUNT.match(c["prompt"])]
    return f"kernel {s['kernel']}; not executed: " + "; ".join(waiting)
