"""The errors a failed or stopped launch raises, built from what its ranks reported.

`failure` names the rank that failed first as the root cause and tells the
others apart (failed because a peer went away, or on their own); `timeout`
tells ranks that never started from ranks that started and never finished.
"""

from __future__ import annotations

import os

from .errors import WorkerFailed, WorkerTimeout

# Messages of a rank that failed only because a peer went away first.
COLLATERAL = ("connection closed by peer", "connection reset by peer",
              "broken pipe", "socket closed", "recv", "communicator was aborted")


def _collateral(rep) -> bool:
    return rep["type"] is not None and any(s in rep["message"].lower() for s in COLLATERAL)


def failure(reports: dict, started) -> WorkerFailed:
    """`reports`: rank -> {time, type, message, traceback} of every failed rank."""
    roots = [r for r in reports if not _collateral(reports[r])] or list(reports)
    root = min(roots, key=lambda r: reports[r]["time"])
    rep = reports[root]
    lost = tuple(sorted(r for r in reports if r != root and _collateral(reports[r])))
    own = tuple(sorted(r for r in reports if r != root and not _collateral(reports[r])))
    what = f"raised {rep['type']}: {first_line(rep['message'])}" if rep["type"] else rep["message"]
    after = "".join([
        f"; rank(s) {ranks(lost)} failed after it (their collectives lost a partner)" if lost else "",
        f"; rank(s) {ranks(own)} also failed, each on its own (see `.reports`)" if own else ""])
    tb = rep["traceback"]
    fix = ". Fix the error in the worker" if root in started else ""
    msg = f"rank {root} {what}{after}{fix}" + ("; its traceback follows." if tb else ".")
    return WorkerFailed(msg + ("\n" + tb if tb else ""), rank=root, worker_traceback=tb,
                        collateral=lost + own, reports=reports)


def timeout(world_size: int, started, done, all_started: bool, run_s: float, startup_s: float) -> WorkerTimeout:
    unfinished = tuple(r for r in range(world_size) if r not in done)
    finished = tuple(sorted(done))
    if not all_started:
        waiting = tuple(r for r in range(world_size) if r not in started)
        return WorkerTimeout(
            f"rank(s) {ranks(waiting)} did not start within {startup_s:g} s"
            + (f" (rank(s) {ranks(sorted(started))} did)" if started else "")
            + ": the machine is slow to start processes (loaded?); try again when it is quieter, "
            "or raise startup_timeout=", unfinished=unfinished, finished=finished)
    return WorkerTimeout(
        f"rank(s) {ranks(unfinished)} did not finish within {run_s:g} s of every rank's start"
        + (f" (rank(s) {ranks(finished)} did)" if finished else "")
        + ": a collective is waiting for a rank that never called it, or the work is slow; "
        "make every rank call the same collectives in the same order, or raise timeout=",
        unfinished=unfinished, finished=finished)


def ranks(rs) -> str:
    return ", ".join(map(str, rs))


def first_line(text) -> str:
    lines = [s for s in str(text).strip().splitlines() if s.strip()]
    return lines[0] if lines else ""


def log_tail(path: str, lines: int | None, keep: int) -> str:
    """The last `lines` lines of a rank's output file (None: all of it, up to `keep` bytes); "" if unread."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - keep))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return text if lines is None else "".join(text.splitlines(keepends=True)[-lines:])
