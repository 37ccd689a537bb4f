"""A `torch.profiler` trace of a few scheduled steps of the workload, exported
for Perfetto / chrome://tracing, one gzipped file per rank in the layout
Holistic Trace Analysis reads (a folder of `rank-N.json.gz`; HTA takes each
file's rank from the `distributedInfo` the profiler writes under
torch.distributed).

Schedule: `wait` steps not recorded, `warmup` recorded and thrown away (the
profiler's own start-up), `active` steps kept. Shapes are not recorded (the
trace stays small). Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

import gzip
import json
import os

import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule

from ...tool import runtime
from ...tool.ddp import sync
from .options import Options
from .plan import build


def trace_name(rank: int) -> str:
    return f"rank-{rank}.json.gz"


def _exporter(trace_dir: str, rank: int):
    def export(prof):
        plain = os.path.join(trace_dir, f"rank-{rank}.json")
        prof.export_chrome_trace(plain)
        with open(plain) as f:
            data = json.load(f)
        data.pop("host_name", None)   # the trace travels with the course: no machine names
        data["traceName"] = trace_name(rank)
        with gzip.open(os.path.join(trace_dir, trace_name(rank)), "wt") as g:
            json.dump(data, g, separators=(",", ":"))
        os.unlink(plain)   # HTA reads every .json in the folder: leave only the .gz
    return export


def profile_steps(o: Options, trace_dir: str, wait: int = 1, warmup: int = 1, active: int = 3,
                  top: int = 12) -> dict:
    """Profile wait + warmup + active training steps on this rank; write its
    trace into `trace_dir`; return the trace's path, its size, and the `top`
    operators by self time (key_averages: name, calls, self CPU / device us).
    Defined in notebook 07_diagnose_your_own_run."""
    r = build(o)
    os.makedirs(trace_dir, exist_ok=True)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if r.device.type == "cuda" else [])
    total = wait + warmup + active
    with profile(activities=acts, schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
                 on_trace_ready=_exporter(trace_dir, runtime.rank()), record_shapes=False) as prof:
        step, it = 0, iter(r.loader)
        while step < total:
            batch = next(it, None)
            if batch is None:   # an epoch shorter than the schedule: start the next one
                it = iter(r.loader)
                continue
            x, y = batch
            x, y = x.to(r.device, non_blocking=True), y.to(r.device, non_blocking=True)
            loss = F.cross_entropy(r.ddp(x), y)
            loss.backward()
            r.opt.step()
            r.opt.zero_grad(set_to_none=True)
            r.log(0, step, loss)
            prof.step()
            step += 1
    sync(r.device)
    path = os.path.join(trace_dir, trace_name(runtime.rank()))
    return {"rank": runtime.rank(), "trace": path, "bytes": os.path.getsize(path),
            "steps": {"wait": wait, "warmup": warmup, "active": active},
            "top": top_ops(prof, top, r.device.type)}


def top_ops(prof, n: int, device_type: str) -> list[dict]:
    """The `n` operators with the most self time (device time on a GPU, CPU time otherwise)."""
    rows = []
    for e in prof.key_averages():
        dev_us = getattr(e, "self_device_time_total", 0.0) or 0.0
        rows.append({"name": e.key, "calls": e.count, "self_cpu_us": e.self_cpu_time_total,
                     "self_device_us": dev_us})
    key = "self_device_us" if device_type == "cuda" else "self_cpu_us"
    return sorted(rows, key=lambda d: -d[key])[:n]
