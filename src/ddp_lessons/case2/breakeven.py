"""Is the model too simple? A break-even predictor for case 2, from measured costs.

One epoch on n workers, each with `ceil(size / n)` samples in
`steps = ceil(ceil(size / n) / batch)` micro-steps, costs

    epoch_fixed + steps * (step_fixed + compute(batch, params) * slowdown(n)
                           + allreduce(4 * params bytes) / accumulate)
    + (validation: val_steps * (step_fixed + compute / 3))

and the run adds `startup(n)` once (process start, rendezvous, Lightning's
setup). `compute` is `c0 + k * batch * params` (fitted to measured steps),
the all-reduce is `allreduce.predict_time` of a measured latency/bandwidth fit.
DDP divides the steps by n but adds an all-reduce to every synchronised step:
it wins once the compute it saves outweighs what it adds.
Defined in notebook 06_case2_breakeven.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from ..allreduce import predict_time
from .model import param_count

@dataclasses.dataclass
class Costs:
    """Measured costs the predictor works from (seconds; bandwidth in B/s)."""
    c0: float                  # compute of one micro-step at zero size
    k: float                   # compute seconds per (sample x parameter)
    step_fixed: float = 0.0    # per micro-step, size-independent (framework, logging, NVML)
    epoch_fixed: float = 0.0   # per epoch (loader start, epoch end)
    latency: float = 0.0       # all-reduce fit
    bandwidth: float = 1e12
    startup: dict = dataclasses.field(default_factory=dict)   # world size -> seconds
    slowdown: dict = dataclasses.field(default_factory=dict)  # world size -> compute factor
    source: str = ""

    def compute(self, batch: int, params: int) -> float:
        return self.c0 + self.k * batch * params


def fit_compute(points) -> tuple[float, float]:
    """Least squares of compute = c0 + k * batch * params over (batch, params, seconds)."""
    xs = [b * p for b, p, _ in points]
    ys = [t for _, _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    k = max(k, 0.0)
    return max(my - k * mx, 0.0), k


def predict(costs: Costs, width=256, depth=3, batch=256, size=5000, epochs=1,
            world_size=1, accumulate=1, validate=False) -> dict:
    """Predicted wall time of `epochs` epochs on `world_size` workers, by part."""
    n = world_size
    params = param_count(width, depth)
    steps = math.ceil(math.ceil(size / n) / batch)
    compute = costs.compute(batch, params) * costs.slowdown.get(n, 1.0)
    comm = predict_time(4 * params, {"latency": costs.latency, "bandwidth": costs.bandwidth}) if n > 1 else 0.0
    parts = {"startup": costs.startup.get(n, 0.0),
             "epoch fixed": epochs * costs.epoch_fixed,
             "step fixed": epochs * steps * costs.step_fixed,
             "compute": epochs * steps * compute,
             "all-reduce": epochs * math.ceil(steps / accumulate) * comm,
             "validation": epochs * steps * (costs.step_fixed + compute / 3) if validate else 0.0}
    return {"world_size": n, "params": params, "grad_bytes": 4 * params, "steps_per_epoch": steps,
            "allreduce_per_step": comm, "parts": parts, "total": sum(parts.values())}


def speedup(costs: Costs, world_size=3, **kw) -> float:
    """Predicted time on 1 worker over time on `world_size` (> 1: DDP wins)."""
    return predict(costs, world_size=1, **kw)["total"] / predict(costs, world_size=world_size, **kw)["total"]


def breakeven(costs: Costs, vary: str, values, world_size=3, **kw):
    """The first of `values` for `vary` ('width', 'depth', 'batch', 'size', 'epochs')
    at which `world_size` workers beat one; None if none does."""
    for v in values:
        if speedup(costs, world_size, **(kw | {vary: v})) > 1.0:
            return v
    return None


def table(costs: Costs, vary: str, values, world_size=3, **kw) -> list[dict]:
    """Rows of (value, params, time on 1, time on n, speedup) for a plot or a table."""
    rows = []
    for v in values:
        a = predict(costs, world_size=1, **(kw | {vary: v}))
        b = predict(costs, world_size=world_size, **(kw | {vary: v}))
        rows.append({vary: v, "params": a["params"], "t1": a["total"], "tn": b["total"],
                     "speedup": a["total"] / b["total"]})
    return rows
