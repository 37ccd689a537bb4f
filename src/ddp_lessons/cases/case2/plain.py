"""Case 2's workload without Lightning: the same model, data, batch and optimizer
in a plain PyTorch loop, timed by StepTimer, alone or as a launched DDP worker.

What is left of the difference per step against `case2.fit_here` is
Lightning's own work. Defined in notebook 06_case2_breakeven.
"""

from __future__ import annotations

import os
import time

import torch

from ...tool import runtime
from ...tool.ddp import wrap_ddp
from ...tool.runs import Rank
from ...tool.timing import StepTimer
from .model import loss_fn, make_dataset, mlp, param_count
from .options import Options


def fit(opts, accelerator: str | None = None, steps: int | None = None) -> dict:
    """The fixed test's training loop in plain PyTorch, timed by StepTimer.

    Runs alone (one process, no DDP) or as a launched worker (DDP on every
    rank, a DistributedSampler). Same model, data, batch, optimizer as
    `case2.fit_here(opts)`: what is left of the difference per step is
    Lightning's own work. Returns wall time, counts and per-step times.
    `accelerator`: as a worker, None follows the process group and one that
    contradicts it is refused (ValueError); alone, None means the CPU. Defined in notebook 06_case2_breakeven."""
    import torch.distributed as dist
    from torch.utils.data import DataLoader, DistributedSampler

    accelerator = runtime.accelerator(accelerator)
    dev = torch.device("cuda", runtime.local_rank()) if accelerator == "gpu" else torch.device("cpu")
    torch.manual_seed(opts.seed)
    model = mlp(opts.width, opts.depth).to(dev)
    ddp = dist.is_initialized() and dist.get_world_size() > 1
    if ddp:
        model = wrap_ddp(model, dev)
    opt = torch.optim.Adam(model.parameters(), lr=opts.lr)
    data = make_dataset(opts)
    sampler = DistributedSampler(data, shuffle=True, seed=opts.seed) if ddp else None
    loader = DataLoader(data, batch_size=opts.batch_size, shuffle=sampler is None, sampler=sampler)
    timer = StepTimer(model if ddp else None, device=dev, batch_size=opts.batch_size)
    t0 = time.perf_counter()
    done = 0
    for epoch in range(opts.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for x, y in timer.data(loader):
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            with timer.phase("forward"):
                loss = loss_fn(model(x), y, opts)
            timer.finish_step(loss, opt)
            done += 1
            if steps is not None and done >= steps:
                break
        if steps is not None and done >= steps:
            break
    loss_value = loss.item()  # note: CPU-GPU sync point, once, so the wall time is complete
    wall = time.perf_counter() - t0
    return {"wall": wall, "optimizer_steps": done, "loss": loss_value, "pid": os.getpid(),
            "rank": dist.get_rank() if dist.is_initialized() else 0,
            "world_size": dist.get_world_size() if dist.is_initialized() else 1,
            "timer": timer.result()}


def compute_sweep(opts: Options, widths, accelerator: str | None = None, steps=30) -> list[dict]:
    """Plain-loop median step time (forward+backward+optimizer) at each width.
    Defined in notebook 06_case2_breakeven."""
    rows = []
    for w in widths:
        m = Rank(fit(opts.replace(width=w), accelerator, steps)).median_step(5)
        rows.append({"width": w, "depth": opts.depth, "batch": opts.batch_size, "params": param_count(w, opts.depth),
                     "compute": m["forward"] + m["backward_compute"] + m["optimizer"], "step_time": m["step_time"]})
    return rows
