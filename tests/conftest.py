"""What every test under tests/ must leave behind: no process of ours, no run directory.

The launcher promises that no worker process and no temporary directory
outlives `launch`, whatever happens (see ddp_lessons.tool.launcher.parent); a test
that starts workers some other way (torchrun, `python -m ddp_lessons`) must
clean up too. This fixture checks it after every test in tests/, once, here.
Notebooks (nbval, under notebooks/) are outside this directory and unaffected.
"""

import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

# The shared helpers (workers that spawned children import by name, simulated runs, the browser's and
# the notebooks' support) live in tests/support, put on the path here for every folder of tests.
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

# A suite started in the background (`cmd &` in a non-interactive shell) inherits SIGINT
# ignored, and so would every process it starts: the tests that interrupt a launch, as
# Jupyter does, could interrupt nothing. Children of a process with a handler get the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_WORKER_TIMINGS: list = []  # the browser test's timings, sent by the pytest-xdist worker that ran it


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    import browser_support
    _WORKER_TIMINGS.extend(getattr(node, "workeroutput", {}).get(browser_support.Timings.name, []))


def pytest_terminal_summary(terminalreporter):
    import browser_support
    browser_support.show_timings(terminalreporter, _WORKER_TIMINGS)


RUN_DIR_PREFIX = "ddp_lessons-"   # tempfile.mkdtemp(prefix=...) in launcher/parent.py
GRACE_S = 5.0                    # time an exiting process or a closing launcher gets


@pytest.fixture(scope="session", autouse=True)
def private_tmpdir(tmp_path_factory):
    """Run directories go to a temporary directory of this session only.

    Other pytest runs on the machine (another checkout, a notebook) make
    /tmp/ddp_lessons-* directories too; with a private TMPDIR a directory left
    there can only be ours. Set for this process (`tempfile.tempdir`, read by
    `mkdtemp`) and for the processes tests start (TMPDIR, inherited).
    """
    path = tmp_path_factory.mktemp("tmpdir")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMPDIR", str(path))
        mp.setattr(tempfile, "tempdir", str(path))
        yield path


def _ident(p):
    try:
        return p.pid, p.create_time()
    except psutil.Error:
        return None


def _descendants():
    return psutil.Process().children(recursive=True)


def _ours(before):
    """Live processes started during the test, under this pytest process, by a
    process also started during the test (or by pytest itself): launched
    workers, their DataLoader workers, `python -m ddp_lessons`, torchrun.
    Not a child of something that was already running (a module-scoped
    JupyterLab or Chromium of the browser test, and whatever they start), and
    not multiprocessing's resource tracker or fork server (one per
    interpreter, shared by every launch, gone with the interpreter); a
    worker forked by the fork server counts as started by the test."""
    me = os.getpid()
    kids = [p for p in _descendants() if _ident(p) not in before]
    new = {p.pid for p in kids}
    servers = {p.pid for p in _descendants() if _is_server(p)}
    left = []
    for p in kids:
        try:
            if p.status() == psutil.STATUS_ZOMBIE or p.pid in servers:
                continue
            chain, parent = True, p.ppid()
            while parent != me:
                if parent not in new and parent not in servers:
                    chain = False
                    break
                parent = psutil.Process(parent).ppid()
        except psutil.Error:  # exited meanwhile
            continue
        if chain:
            left.append(p)
    return left


def _is_server(p) -> bool:
    try:
        cmd = " ".join(p.cmdline())
    except psutil.Error:
        return False
    return "resource_tracker" in cmd or "multiprocessing.forkserver" in cmd


def _run_dirs(root):
    return {e.path for e in os.scandir(root) if e.name.startswith(RUN_DIR_PREFIX)}


def _describe(procs):
    out = []
    for p in procs:
        try:
            out.append(f"{p.pid}: {' '.join(p.cmdline())[:200]}")
        except psutil.Error:
            out.append(f"{p.pid}: (exited)")
    return out


@pytest.fixture(autouse=True)
def nothing_left_behind(private_tmpdir):
    before = {_ident(p) for p in _descendants()}
    dirs_before = _run_dirs(private_tmpdir)
    yield
    deadline = time.monotonic() + GRACE_S
    while True:
        procs = _ours(before)
        dirs = sorted(_run_dirs(private_tmpdir) - dirs_before)
        if not procs and not dirs or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not procs, f"processes left behind: {_describe(procs)}"
    assert not dirs, f"temporary run directories left behind: {dirs}"
