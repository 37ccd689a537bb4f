"""Notebook 00's worker: the small MLP of `options.Options` trained with DDP on random data, every step
timed by `StepTimer` (`train`); what it returns is read with `ddp_lessons.Run`. `overhead_results`: the
recorded timer-overhead run made again on this machine's GPUs (`course.replay`).
Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import statistics

import torch.distributed as dist
import torch.nn as nn

from ...tool.ddp import gradient_bytes
from ...course.timer_validation.overhead import MODES, all_modes
from ...tool.launcher import launch, report_progress
from ...tool.timing import StepTimer, ddp_logging_times
from . import plan
from .options import Options


def train(o: Options | None = None, **changes) -> dict:
    """Worker: train `o`'s MLP (`Options()` with `changes` on top) and time every step. Returns the
    timer's result (`Run` reads it) with the worker's own keys: "ddp_logging" (DDP's own timings of
    steps 0, 1, ... where `o.ddp_logging`), "grad_bytes" and "comm_hook" (the hook DDP ran, by name).
    Defined in notebook 00_first_launch."""
    o = (o or Options()).replace(**changes)
    p = plan.build(o)
    timer = StepTimer(p.model, enabled=o.timed, hook=p.hook, mode=o.mode)
    logged = []
    for i, (x, y) in enumerate(timer.data(p.batches)):
        x, y = x.to(p.device, non_blocking=True), y.to(p.device, non_blocking=True)
        with timer.phase("forward"):
            loss = nn.functional.mse_loss(p.model(x), y)
        if o.ddp_logging and i > 0:
            # DDP updates its logging data in the forward pass: it now holds step i-1.
            logged.append(ddp_logging_times(p.model))
        timer.finish_step(loss, p.optimizer)
        report_progress(i + 1, o.steps)
    out = timer.result() if o.timed else {"rank": dist.get_rank(), "steps": []}
    out["ddp_logging"] = logged
    out["grad_bytes"] = gradient_bytes(p.model)
    out["comm_hook"] = p.model._get_ddp_logging_data().get("comm_hook", "")
    return out


def overhead_results(c: dict, where) -> dict:
    """The results of an "overhead" record (benchmarks/timing_overhead.py) with its config `c`, made on
    `where`'s ranks: every timer mode against DDP alone in `c["rounds"]` rotated rounds."""
    out = launch(all_modes, (c["steps"], c["width"], c["depth"], c["batch"], c["rounds"]),
                 world_size=where.world_size, backend=where.backend, timeout=600)
    # As the benchmark: a step is as slow as its slowest rank; medians over rounds.
    times = {m: [max(r[m][i] for r in out) for i in range(c["rounds"])] for m in MODES}
    med = {m: statistics.median(v) for m, v in times.items()}
    return {"per_round": times, "median": med, "overhead": med["full"] / med["off"] - 1}
