"""benchmarks/timer_validation.py's worker, whole: the paired rounds of every
timer mode (`timer_bench`), then the profiler agreement, the flight recorder
against the profiler and the small costs (`timer_agree`).
"""

from __future__ import annotations

import os
import time
import traceback

import torch
import torch.distributed as dist

from ddp_lessons.tool import runtime
from benchlib import timer_agree as agree
from benchlib.timer_bench import ENV_KEYS, agree_flag, make_data, run_rounds, write_partial


def validate(cfg: dict) -> dict:
    """The whole worker: rounds, then profiler agreement and small costs."""
    dev = runtime.device()
    res = {"rank": runtime.rank(), "world_size": runtime.world_size(), "device": str(dev),
           "rounds": [], "notes": [], "env": {k: os.environ.get(k) for k in ENV_KEYS}}
    if dev.type == "cuda":
        res["gpu"] = torch.cuda.get_device_name(dev)
        v = torch.cuda.nccl.version()
        res["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    groups = {"plain": None, "timed": dist.new_group(list(range(runtime.world_size())))}
    data = make_data(cfg, dev)
    run_rounds(cfg, data, groups, res)
    for name, fn in (("agreement", agree.profile_all), ("fr_kernels", agree.fr_vs_profiler),
                     ("micro", agree.micro)):
        if not agree_flag(time.time() < cfg["deadline"] + cfg.get("extra_s", 20)):
            res["notes"].append(f"{name} skipped: time budget reached")
            continue
        try:
            res[name] = fn(cfg, data, groups)
        except Exception as exc:  # noqa: BLE001 - recorded
            res[name] = {"error": f"{type(exc).__name__}: {exc}"[:2000],
                         "traceback": traceback.format_exc()[-3000:]}
        write_partial(cfg, res)
    return res
