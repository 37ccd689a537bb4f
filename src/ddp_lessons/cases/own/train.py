"""One rank's training run of the workload, timed: every step with `StepTimer`,
and around them what happens between epochs (the evaluation), so the epoch's
wall time is accounted for (`train_s` + `eval_s` per epoch, per rank).

`train(options)` is the worker `launch` runs; `rounds(setups, rounds)` runs
several setups in interleaved rounds inside one launch (A B, B A, ...), so a
comparison does not pay a process start per run and no setup always runs
first. Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

import time

import torch.distributed as dist
import torch.nn.functional as F

from ...tool import spread
from ...tool.ddp import sync
from ...tool.launcher import report_progress
from ...tool.timing import StepTimer
from .options import Options
from .plan import Rank, build


def epoch(r: Rank, timer: StepTimer, e: int) -> int:
    """One epoch of training steps; returns how many it took."""
    if r.o.set_epoch:
        r.sampler.set_epoch(e)
    steps = 0
    for x, y in timer.data(r.loader):
        x, y = x.to(r.device, non_blocking=True), y.to(r.device, non_blocking=True)
        with timer.phase("forward"):
            loss = F.cross_entropy(r.ddp(x), y)
        with timer.phase("backward"):
            loss.backward()
        with timer.phase("optimizer"):
            r.opt.step()
            r.opt.zero_grad(set_to_none=True)
        with timer.phase("log"):
            r.log(e, steps, loss)
        timer.step_done()
        steps += 1
        if r.o.steps_limit and steps >= r.o.steps_limit:
            break
    return steps


def train(o: Options, group=None, run_start="process") -> dict:
    """Train for `o.epochs` epochs on the ranks of `group` (None: all); per rank:
    every epoch's train and evaluation time (seconds, host clock, the device
    synchronised at each edge), the steps, the timer's per-step numbers, and
    what ran where. `run_start`: the timer's (where this run's start-up began)."""
    r = build(o, group)
    # the timer's clock and hook follow the DDP model's process group: the ranks that train
    timer = StepTimer(r.ddp, batch_size=o.batch_size, run_start=run_start)
    epochs, t_run = [], time.perf_counter()
    for e in range(o.epochs):
        sync(r.device)
        t0 = time.perf_counter()
        first = sum(ep["steps"] for ep in epochs)   # this epoch's first step in the timer
        steps = epoch(r, timer, e)
        sync(r.device)
        t1 = time.perf_counter()
        with timer.outside("eval"):   # between epochs: outside every step, timed as such
            ev = r.evaluate()
            sync(r.device)
        epochs.append({"epoch": e, "steps": steps, "first_step": first, "train_s": t1 - t0,
                       "eval_s": time.perf_counter() - t1, **{f"eval_{k}": v for k, v in ev.items()}})
        report_progress(e + 1, o.epochs)
    wall = time.perf_counter() - t_run
    return {"rank": dist.get_rank(group), "world_size": dist.get_world_size(group), "device": str(r.device),
            "backend": dist.get_backend() if dist.is_initialized() else None,
            "threads": r.threads, "workers": r.workers, "batch_size": o.batch_size,
            "wall_s": wall, "epochs": epochs, "timer": timer.result(), "order": sample_order(r)}


def sample_order(r: Rank) -> list[list[int]]:
    """The first indices this rank's sampler gives in epochs 0 and 1, as the
    options leave it: without set_epoch both epochs see the same order."""
    out = []
    for e in (0, 1):
        if r.o.set_epoch:
            r.sampler.set_epoch(e)
        out.append(list(iter(r.sampler))[:8])
    return out


def rounds(setups: dict, n_rounds: int) -> dict:
    """Run every setup in `n_rounds` interleaved rounds. `setups`: name ->
    Options (on every rank) or (Options, k): on ranks 0 .. k-1 only, while the
    others wait, so one launch of 2 ranks times 1 rank against 2 in the same
    rounds. Returns name -> this rank's `train` result per round (a rank
    outside a setup has none), and the order they ran in. Defined in notebook 07_diagnose_your_own_run."""
    setups = {k: v if isinstance(v, tuple) else (v, dist.get_world_size()) for k, v in setups.items()}
    # new_group is a collective of every rank, members or not: make each group once, up front.
    groups = {k: None if k == dist.get_world_size() else dist.new_group(list(range(k)))
              for k in sorted({k for _, k in setups.values()})}
    order = spread.interleave(list(setups), n_rounds)
    out = {name: [] for name in setups}
    for row in order:
        for name in row:
            o, k = setups[name]
            dist.barrier()   # every setup starts with all ranks together
            if dist.get_rank() < k:
                # this run's start-up is from here: the process's start and earlier runs are not its own
                out[name].append(train(o, groups[k], run_start=time.perf_counter()))
    dist.barrier()
    return {"runs": out, "order": order, "rank": dist.get_rank()}
