"""The worker of benchmarks/timing_overhead.py: one DDP loop, instrumented or not.

Every mode of `MODES` (each described there) runs through the same loop, `loop_seconds_per_step`.
Kept in the package so the benchmark runs unchanged on a GPU machine and under torchrun.
benchmarks/timer_validation.py measures the same on case 2's model, with the profiler.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
import torch.nn as nn

from ...tool import runtime
from ..toy import mlp
from ...tool.ddp import sync, wrap_ddp
from ...tool.hooks import allreduce_hook
from ...tool.timing import StepTimer

# off      StepTimer disabled: DDP's own (C++) all-reduce, no marks
# phases   phase marks only (host clock or CUDA events), DDP's own all-reduce
# light    phase marks, DDP's own all-reduce, its own timings read every step
#          (and the flight recorder on NCCL): StepTimer(mode="light")
# py_hook  no marks, but DDP's stock Python `allreduce_hook` registered:
#          what any Python communication hook costs, timing or not
# full     phase marks and the timing communication hook (around the same allreduce_hook)
MODES = ("off", "phases", "light", "py_hook", "full")


def loop_seconds_per_step(steps: int, width: int, depth: int, batch: int, mode: str = "full",
                          warmup: int = 5) -> float:
    """Mean seconds per step after `warmup` steps."""
    torch.manual_seed(0)
    dev = runtime.device()
    model = wrap_ddp(mlp(width, depth).to(dev), dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 32, device=dev)
    y = torch.randn(batch, 1, device=dev)
    # py_hook: torch's allreduce_hook registered untimed; full: the same hook, timed.
    timer = StepTimer(model, enabled=mode in ("phases", "light", "full"), time_comm=mode != "phases",
                      hook=allreduce_hook if mode == "py_hook" else None,
                      mode="light" if mode in ("phases", "light") else "full")
    for i in range(warmup + steps):
        if i == warmup:
            sync(dev)
            dist.barrier()
            t0 = time.perf_counter()
        for _ in timer.data([None]):
            with timer.phase("forward"):
                loss = nn.functional.mse_loss(model(x), y)
            timer.finish_step(loss, opt)
    sync(dev)  # note: the one CPU-GPU sync, after the timed loop
    elapsed = time.perf_counter() - t0
    if timer.enabled:
        timer.result()  # reading the events is part of the instrumented cost
    return elapsed / steps


def all_modes(steps: int, width: int, depth: int, batch: int, rounds: int = 5) -> dict:
    """Every mode `rounds` times in one worker, in rotated order (drift hits all alike)."""
    times = {m: [] for m in MODES}
    for i in range(rounds):
        for m in MODES[i % len(MODES):] + MODES[:i % len(MODES)]:
            times[m].append(loop_seconds_per_step(steps, width, depth, batch, m))
    return times

