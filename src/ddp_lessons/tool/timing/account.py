"""Where all of one rank's timed window went: steps, named work outside the
steps, and the remainder no mark covers.

    wall = steps + outside (by name) + unattributed

`account` makes it (its docstring says how each part is split), `startup_since` the start-up
before the window, `run_info` what a result carries about its run.
"""

from __future__ import annotations

import os
import socket
import time


def process_age() -> float | None:
    """Seconds since this process started (psutil), or None where unknown."""
    try:
        import psutil
        return time.time() - psutil.Process().create_time()
    except Exception:  # noqa: BLE001 - no psutil or no permission: start-up unknown
        return None


def startup_since(run_start) -> float | None:
    """The account's start-up: seconds since `run_start`, which is "process"
    (the process's start), a `time.perf_counter()` reading, or None (not known:
    nothing is counted)."""
    if run_start is None:
        return None
    if isinstance(run_start, str) and run_start == "process":
        return process_age()
    if isinstance(run_start, (int, float)) and not isinstance(run_start, bool):
        return max(0.0, time.perf_counter() - float(run_start))
    raise ValueError(f"run_start={run_start!r}: use 'process', a time.perf_counter() reading taken "
                     "where this run began, or None")


def _union(intervals):
    merged = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def _gaps(wall, intervals):
    """The parts of [0, wall] no interval covers, as (start, end)."""
    out, t = [], 0.0
    for a, b in _union(intervals):
        if a > t:
            out.append((t, min(a, wall)))
        t = max(t, b)
    if wall > t:
        out.append((t, wall))
    return [(a, b) for a, b in out if b > a]


def in_steps(steps) -> dict:
    """Step time split into data wait, each phase (summed over steps) and the
    steps' remainder that no phase covers."""
    phases: dict[str, float] = {}
    data = total = 0.0
    for s in steps:
        total += s["step_time"]
        data += s.get("data", 0.0)
        for name, (a, b) in s.get("phases", {}).items():
            phases[name] = phases.get(name, 0.0) + (b - a)
    return {"data": data, "phases": phases, "remainder": max(0.0, total - data - sum(phases.values()))}


def account(wall: float, steps, outside, startup: float | None = None) -> dict:
    """The account of one rank's window: wall = steps + outside (by name) + unattributed.

    `wall` runs from the timer's creation (its reference point, after a barrier when there are
    several ranks) to `result()`. The unattributed remainder is split by where it lies: before the
    first step (building the model, loaders, anything between the timer's creation and the first
    batch wait), between steps (what the loop does after `step_done()` and before the next step's
    first mark: logging, `loss.item()`, prints, the end of a loader), and after the last step.
    `in_steps` splits step time into the data wait, each phase, and the step's own remainder (time
    in a step that no phase covers). `startup` is the time from the run's start to the reference
    point (imports, joining the group, building the model): outside the window, reported beside it.
    The run starts at the process's start, or where the user says (`StepTimer(run_start=...)`:
    several runs in one process), or is unknown (None).

    `steps`: the timer's step dicts (`t_start`, `step_time`, ...); `outside`:
    dicts with `name`, `start`, `end` (seconds since the reference point)."""
    step_iv = [(s["t_start"], s["t_start"] + s["step_time"]) for s in steps]
    out_iv = [(o["start"], o["end"]) for o in outside]
    by_name: dict[str, float] = {}
    for o in outside:
        by_name[o["name"]] = by_name.get(o["name"], 0.0) + o["end"] - o["start"]
    step_total = sum(b - a for a, b in step_iv)
    first = min((a for a, _ in step_iv), default=wall)
    last = max((b for _, b in step_iv), default=wall)
    split = {"before_first_step": 0.0, "between_steps": 0.0, "after_last_step": 0.0}
    for a, b in _gaps(wall, step_iv + out_iv):
        key = "before_first_step" if b <= first else "after_last_step" if a >= last else "between_steps"
        split[key] += b - a
    return {"wall": wall, "steps": step_total, "outside": by_name,
            "unattributed": wall - step_total - sum(by_name.values()), **split,
            "in_steps": in_steps(steps), "startup": startup}


def run_info(device, mode, batch_size, group=None) -> dict:
    """What a result carries about its run: rank and world size in `group`
    (None: every rank), the group's global ranks where it is not every rank,
    backend, device, timer mode, torch threads, batch size (as given), start method, host name and
    the cores this process may run on."""
    import torch
    import torch.distributed as dist
    grouped = dist.is_available() and dist.is_initialized()
    out = {"rank": dist.get_rank(group) if grouped else 0,
           "world_size": dist.get_world_size(group) if grouped else 1,
           "backend": dist.get_backend(group) if grouped else None,
           "device": str(device), "mode": mode, "threads": torch.get_num_threads(),
           "batch_size": batch_size, "start_method": start_method(),
           # ranks on one host that together run more threads than it has cores share them: a wait is then
           # partly time a peer took from this rank (`diagnose` notes it)
           "host": socket.gethostname(), "cores": _cores()}
    if grouped and group is not None and dist.get_world_size(group) != dist.get_world_size():
        out["group_ranks"] = dist.get_process_group_ranks(group)
    return out


def _cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity call (macOS): every core
        return os.cpu_count()


def start_method() -> str | None:
    """How this worker was started: `launch`'s start method, "torchrun", or None."""
    if os.environ.get("DDP_LESSONS_START_METHOD"):
        return os.environ["DDP_LESSONS_START_METHOD"]
    return "torchrun" if os.environ.get("TORCHELASTIC_RUN_ID") else None
