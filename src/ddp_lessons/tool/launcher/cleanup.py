"""What a launch leaves behind when its own process is stopped: nothing, or nothing for long.

`reserve_port()` holds a loopback port for the run; `run_directory()` makes the run's private temporary
directory, with a file naming the launching process (pid and start time); `remove(path)` removes it so
that a worker still starting cannot write into it while it is being removed; `sweep()`, called first by
every launch, removes the run directories of launching processes that no longer exist (one killed by
SIGKILL cannot clean up); `terminate_raises()`: while a launch runs in the main thread, SIGTERM raises
`SystemExit` instead of ending the process at once, so the launch's own `finally` stops the workers and
removes the directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import threading

PREFIX = "ddp_lessons-"
OWNER = "owner"


def _me() -> str:
    return f"{os.getpid()} {_start_time(os.getpid())}"


def _start_time(pid: int) -> str:
    try:
        import psutil
        return repr(psutil.Process(pid).create_time())
    except Exception:  # noqa: BLE001 - gone, or no psutil: no start time to compare
        return "?"


def reserve_port() -> socket.socket:
    """A loopback port held for the run (closed with it). Bound but never listening: the number stays
    ours (no other bind(0) gets it) and nothing accepts connections on it. Workers see it as MASTER_PORT
    for code that reads it; the rendezvous itself uses files."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def run_directory() -> str:
    path = tempfile.mkdtemp(prefix=PREFIX)
    try:
        with open(os.path.join(path, OWNER), "w") as f:
            f.write(_me())
    except BaseException:  # an interrupt here: a directory without its owner is never swept
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def remove(path: str) -> None:
    """Remove a run directory. Renamed first: a worker the fork server forks after
    the launch was stopped opens its files by the directory's path, and would
    otherwise add one to it while rmtree empties it (rmtree then leaves it)."""
    gone = path + ".closing"
    try:
        os.rename(path, gone)
    except OSError:
        gone = path
    shutil.rmtree(gone, ignore_errors=True)


def _orphaned(path: str) -> bool:
    try:
        with open(os.path.join(path, OWNER)) as f:
            pid, started = f.read().split()
    except (OSError, ValueError):
        return False  # being made now, or not ours to judge
    return _start_time(int(pid)) != started  # exited, or the pid now names another process


def sweep(root: str | None = None) -> list[str]:
    """Remove run directories under `root` (the temporary directory) whose
    launching process is gone; return their paths."""
    root = root or tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = [e for e in os.scandir(root) if e.name.startswith(PREFIX) and e.is_dir()]
    except OSError:
        return removed
    for e in entries:
        if _orphaned(e.path):
            shutil.rmtree(e.path, ignore_errors=True)
            removed.append(e.path)
    return removed


@contextlib.contextmanager
def terminate_raises():
    """SIGTERM raises SystemExit(143) in the main thread while the block runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise SystemExit(128 + signum)
    try:
        old = signal.signal(signal.SIGTERM, _raise)
    except (ValueError, OSError):  # not settable here (an embedded interpreter)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
