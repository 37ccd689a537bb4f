"""Core budgeting: how many loader workers and intra-op threads each rank can
have before the ranks start taking cores from each other.

On one machine every rank's threads and loader workers share the same cores:
ranks x (threads + workers) above the core count means processes take turns,
and a step waits for whichever is descheduled. `budget` gives one rank's share (the rule the
course's case 1 uses), `load` what a chosen setting asks of the machine.
Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations


def budget(cores: int, ranks: int, device_type: str) -> dict:
    """One rank's share of `cores` among `ranks`: share, workers, threads, and the
    processes and threads the whole machine then runs. Defined in notebook 07_diagnose_your_own_run."""
    if cores < 1 or ranks < 1:
        raise ValueError(f"cores={cores}, ranks={ranks}: both must be at least 1")
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"device_type={device_type!r}: use 'cpu' or 'cuda'")
    share = max(1, cores // ranks)
    if device_type == "cuda":  # the rank's own process only queues kernels; the rest goes to loader workers
        workers, threads = share - 1, 1
    else:  # the math is the step: threads keep most, workers a quarter rounded up, none on a single core
        workers = 0 if share == 1 else -(-share // 4)
        threads = max(1, share - workers)
    return {"cores": cores, "ranks": ranks, "share": share, "workers": workers, "threads": threads,
            "busy": ranks * (threads + workers), "oversubscribed": ranks * (threads + workers) > cores}


def load(cores: int, ranks: int, workers: int, threads: int) -> dict:
    """What a chosen setting asks of the machine: runnable threads and processes
    against the cores (`ratio` > 1: they take turns). Defined in notebook 07_diagnose_your_own_run."""
    busy = ranks * (threads + workers)
    return {"cores": cores, "ranks": ranks, "workers": workers, "threads": threads,
            "busy": busy, "ratio": busy / cores}
