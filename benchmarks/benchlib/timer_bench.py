"""The worker of benchmarks/timer_validation.py: what the timer costs, paired.

Case 2's model and step (an MLP 10 -> 256 x3 -> 1, batch 256, Adam lr 0.01, MSE on random data made
on the device once), under DDP, in every mode of `MODES`, round after round (`run_rounds`) inside one
process; each round's time of a mode is compared with the built-in all-reduce of the same round.
`timer_validate` runs it all, then `timer_agree` compares the timer with torch.profiler and measures
the small costs (`micro`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import traceback

import torch
import torch.distributed as dist
from torch import nn

from ddp_lessons.tool import runtime
from ddp_lessons.course.toy import mlp
from ddp_lessons.tool.ddp import sync, wrap_ddp
from ddp_lessons.tool.hooks import allreduce_hook
from ddp_lessons.tool.runs import Rank
from ddp_lessons.tool.timing import StepTimer

D_IN = 10  # case 2's MLP: 10 -> 256 -> 256 -> 256 -> 1

# mode -> StepTimer keyword arguments (None: no timer)
MODES = {"builtin": None,
         "light": {"mode": "light"},   # the default on a GPU: flight recorder, DDP's timings every 10th step
         "light_marks": {"mode": "light", "time_comm": False},      # the phase marks alone
         "light_fr": {"mode": "light", "ddp_logging": False},       # marks and the flight recorder
         "light_ddp": {"mode": "light", "ddp_logging": True},       # DDP's own timings read every step
         "full": {"mode": "full"}, "pyhook": None,
         "profiler": None}   # no timer: torch.profiler (CPU and CUDA activities) around every step
KEEP = ("step_time", "forward", "backward", "optimizer", "allreduce", "allreduce_span",
        "exposed", "allreduce_calls", "allreduce_bytes")


def make_data(cfg, dev):
    g = torch.Generator(device=dev).manual_seed(1000 + runtime.rank())
    return (torch.randn(cfg["batch"], D_IN, device=dev, generator=g),
            torch.randn(cfg["batch"], 1, device=dev, generator=g))


def build(mode, cfg, groups):
    """A fresh DDP model, its optimizer and (for timer modes) its timer."""
    dev = runtime.device()
    torch.manual_seed(0)
    # a group of their own for light modes: the light timer turns on collective timing for its model's
    # group, and that must not leak into the other modes
    pg = groups["timed"] if mode.startswith("light") else groups["plain"]
    model = wrap_ddp(mlp(cfg["width"], cfg["depth"], d_in=D_IN).to(dev), dev, process_group=pg)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    if mode == "pyhook":
        model.register_comm_hook(None, allreduce_hook)
    kwargs = MODES[mode]
    timer = StepTimer(model, **kwargs) if kwargs is not None else None
    return model, opt, timer


def step(model, opt, timer, x, y):
    if timer is None:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return
    with timer.phase("forward"):
        loss = nn.functional.mse_loss(model(x), y)
    timer.finish_step(loss, opt)


def _profiled(mode, dev):
    """torch.profiler recording every step (CPU and, on a GPU, CUDA activities) for mode "profiler"."""
    if mode != "profiler":
        return contextlib.nullcontext()
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA]
                                                    if dev.type == "cuda" else [])
    return torch.profiler.profile(activities=acts)


def run_mode(mode, cfg, data, groups) -> dict:
    """Seconds per step of `steps` steps after `warmup`, and the timer's medians."""
    model, opt, timer = build(mode, cfg, groups)
    dev, (x, y) = runtime.device(), data
    with _profiled(mode, dev):
        for i in range(cfg["warmup"] + cfg["steps"]):
            if i == cfg["warmup"]:
                sync(dev)  # note: CPU-GPU sync point, at the edge of the timed loop only
                t0 = time.perf_counter()
            step(model, opt, timer, x, y)
        sync(dev)  # note: CPU-GPU sync point, after the timed loop
        out = {"s_per_step": (time.perf_counter() - t0) / cfg["steps"]}
    if timer is not None:
        t1 = time.perf_counter()
        res = timer.result()
        out["result_s"] = time.perf_counter() - t1
        med = Rank(res).median_step(cfg["warmup"])
        out.update(comm_source=res["comm_source"], median={k: med[k] for k in KEEP if k in med},
                   flight_recorder=res.get("flight_recorder"))
    return out


def agree_flag(flag: bool) -> bool:
    """True only if every rank says True (one tiny all-reduce)."""
    t = torch.tensor([1.0 if flag else 0.0], device=runtime.device())
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())  # note: CPU-GPU sync point, between rounds only


def run_rounds(cfg, data, groups, res) -> None:
    """Rounds of every mode in rotated order; `res["rounds"]` grows as they finish.
    Every mode of every round runs in try/except and rank 0 rewrites its partial results to
    `cfg["partial"]` after each round; no round starts after `cfg["deadline"]` (time.time(),
    agreed between ranks)."""
    modes = list(cfg["modes"])
    for r in range(cfg["rounds"]):
        if not agree_flag(time.time() < cfg["deadline"]):
            res["notes"].append(f"stopped after {r} rounds: time budget reached")
            break
        row = {}
        for mode in modes[r % len(modes):] + modes[:r % len(modes)]:  # rotated: drift hits every mode alike
            try:
                row[mode] = run_mode(mode, cfg, data, groups)
            except Exception as exc:  # noqa: BLE001 - recorded; the other modes go on
                row[mode] = {"error": f"{type(exc).__name__}: {exc}"[:2000],
                             "traceback": traceback.format_exc()[-3000:]}
        res["rounds"].append(row)
        write_partial(cfg, res)


def write_partial(cfg, res) -> None:
    if runtime.rank() != 0 or not cfg.get("partial"):
        return
    tmp = cfg["partial"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, default=str)
    os.replace(tmp, cfg["partial"])


ENV_KEYS = ("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_ENABLE_TIMING",
            "TORCH_NCCL_CUDA_EVENT_CACHE", "TORCH_NCCL_BLOCKING_WAIT", "TORCH_DISTRIBUTED_DEBUG")
