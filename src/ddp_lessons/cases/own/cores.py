"""Core budgeting: how many loader workers and intra-op threads each rank can
have before the ranks start taking cores from each other.

On one machine every rank's threads and loader workers share the same cores:
ranks x (threads + workers) above the core count means processes take turns,
and a step waits for whichever is descheduled. `budget` gives one rank's share (the rule the
course's case 1 uses), `load` what a chosen setting asks of the machine.
Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

# Loader workers a GPU rank gets at most, however many cores it has. Typical practice is 4 to 8, tuned
# by the data wait: past the count that keeps the queue full more workers only fork at each pass, hold
# batches in memory and take the cores the rank's other threads need (the pin-memory thread, NCCL's
# proxy thread, the CUDA driver's). 16 cores for one rank gave 15 workers before this cap.
MAX_WORKERS = 8


def budget(cores: int, ranks: int, device_type: str) -> dict:
    """One rank's share of `cores` among `ranks`: share, workers, threads, and the
    processes and threads the whole machine then runs (a GPU rank's workers capped at `MAX_WORKERS`).
    Defined in notebook 07_diagnose_your_own_run."""
    if cores < 1 or ranks < 1:
        raise ValueError(f"cores={cores}, ranks={ranks}: both must be at least 1")
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"device_type={device_type!r}: use 'cpu' or 'cuda'")
    share = max(1, cores // ranks)
    if device_type == "cuda":  # the rank's own process only queues kernels; loader workers take the rest,
        workers, threads = min(share - 1, MAX_WORKERS), 1   # up to MAX_WORKERS (the others stay spare)
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
