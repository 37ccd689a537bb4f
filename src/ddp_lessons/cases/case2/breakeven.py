"""Is the model too simple? A break-even predictor for case 2, from measured costs.

`predict` gives a run's wall time by part from `Costs` (its docstring has the formula); `speedup`,
`breakeven` and `table` compare n workers with one. DDP divides the steps by n but adds an all-reduce
to every synchronised step: it wins once the compute it saves outweighs what it adds. `StepModel` asks
the same of N GPUs against a recorded one-GPU step; `powersgd_bytes` is PowerSGD's arithmetic.
Defined in notebook 06_case2_breakeven.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from ...tool import allreduce
from ...tool.allreduce import predict_time
from .model import param_count


@dataclasses.dataclass
class Costs:
    """Measured costs the predictor works from (seconds; bandwidth in B/s). Defined in notebook 06_case2_breakeven."""
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
    """Least squares of compute = c0 + k * batch * params over (batch, params, seconds).
    Defined in notebook 06_case2_breakeven."""
    xs = [b * p for b, p, _ in points]
    ys = [t for _, _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    k = max(k, 0.0)
    return max(my - k * mx, 0.0), k


def predict(costs: Costs, width=256, depth=3, batch=256, size=5000, epochs=1,
            world_size=1, accumulate=1, validate=False) -> dict:
    """Predicted wall time of `epochs` epochs on `world_size` workers, by part.

    One epoch on n workers, each with `ceil(size / n)` samples in
    `steps = ceil(ceil(size / n) / batch)` micro-steps, costs

        epoch_fixed + steps * (step_fixed + compute(batch, params) * slowdown(n)
                               + allreduce(4 * params bytes) / accumulate)
        + (validation: val_steps * (step_fixed + compute / 3))

    and the run adds `startup(n)` once (process start, rendezvous, Lightning's
    setup). `compute` is `c0 + k * batch * params` (fitted to measured steps),
    the all-reduce is `allreduce.predict_time` of a measured latency/bandwidth fit.
    Defined in notebook 06_case2_breakeven."""
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
    """Predicted time on 1 worker over time on `world_size` (> 1: DDP wins).
    Defined in notebook 06_case2_breakeven."""
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


# -- N GPUs against one GPU, step against step: a labelled model ---------------------
@dataclasses.dataclass(frozen=True)
class StepModel:
    """An epoch's training steps of the fixed test on one GPU and on n, step by step (seconds): steps only,
    no validation and no per-epoch work (`readout.epoch_split` has the whole epoch).

    Assumptions (each a row of the sensitivity table or said in notebook 06):
    - a step takes max(its launch floor, GPU compute): the floor is what the host
      needs to launch the step's kernels, measured at the post's width; compute is
      `k * batch * params` once the GPU, not the host, is the limit (`k` from the
      widest recorded step);
    - one GPU runs a recorded step (`one`: the eager step, or the step in one CUDA graph);
      each of n GPUs runs `ddp` (e.g. the DDP step recorded at world size 1: the eager
      step plus DDP's per-step work), with the same per-GPU batch, and adds the
      all-reduce of 4 * params bytes: `latency + bytes * 2(n-1)/n / busbw`, of which
      the share `exposed` is not hidden behind backward;
    - left out: start-up (process start, rendezvous), paid by the n GPUs only, and
      validation, logging and data loading, paid per step or per sample, of which
      each of n GPUs pays 1/n: the model is no bound in either direction. Defined in notebook 06_case2_breakeven."""
    one: float
    ddp: float
    k: float
    latency: float = 30e-6
    busbw: float = 100e9
    exposed: float = 1.0
    batch: int = 256
    size: int = 5000
    depth: int = 3

    def step(self, width: int, n: int) -> float:
        params = param_count(width, self.depth)
        compute = self.k * self.batch * params
        if n == 1:
            return max(self.one, compute)
        return max(self.ddp, compute) + self.exposed * allreduce.estimate(4 * params, self.busbw, self.latency, n)

    def epoch_steps(self, width: int, n: int) -> float:
        """Seconds of one epoch's training steps on each of n GPUs (ceil(ceil(size / n) / batch) steps)."""
        return math.ceil(math.ceil(self.size / n) / self.batch) * self.step(width, n)

    def speedup(self, width: int, n: int) -> float:
        """An epoch's steps on one GPU over those on n (> 1: the n GPUs' steps take less)."""
        return self.epoch_steps(width, 1) / self.epoch_steps(width, n)

    def breakeven(self, n: int, widths) -> int | None:
        """The first of `widths` at which n GPUs beat one; None if none does."""
        return next((w for w in widths if self.speedup(w, n) > 1.0), None)


def k_from_sweep(rows) -> float:
    """GPU seconds per (sample x parameter) at the sweep's widest model, where the
    step is compute-bound (narrower ones sit on the launch floor). Defined in notebook 06_case2_breakeven."""
    top = max(rows, key=lambda r: r["params"])
    return top["compute"] / (top["batch"] * top["params"])


def sensitivity(model: StepModel, n: int, widths, latencies, busbws, exposed=(1.0, 0.0)) -> list[dict]:
    """Break-even width and the speedup at `widths[0]` for every combination of
    all-reduce latency, bus bandwidth and exposed share. Defined in notebook 06_case2_breakeven."""
    rows = []
    for lat in latencies:
        for bw in busbws:
            for ex in exposed:
                m = dataclasses.replace(model, latency=lat, busbw=bw, exposed=ex)
                rows.append({"latency": lat, "busbw": bw, "exposed": ex, "breakeven": m.breakeven(n, widths),
                             f"speedup@{widths[0]}": m.speedup(widths[0], n)})
    return rows


def core_share(ranks: int, cores: int, threads: int) -> float:
    """Compute slowdown of each of `ranks` workers with `threads` threads each on
    `cores` cores, against one process with `threads` threads: 1 while every
    thread has a core of its own, else the oversubscription ranks * threads / cores.
    Defined in notebook 06_case2_breakeven."""
    return max(1.0, ranks * threads / cores)


def powersgd_bytes(model, rank: int = 1, min_compression_rate: float = 2.0) -> tuple[int, int]:
    """(bytes, all-reduces) per step of torch's PowerSGD hook on `model` (fp32) once it compresses: a
    matrix (out x in) that compresses by more than `min_compression_rate` (PowerSGDState's default 2) sends
    P (out x rank) and Q (in x rank), one all-reduce each; vectors and the other matrices go uncompressed
    in a third. Arithmetic, not a measurement. Defined in notebook 05_case2_where_time_goes."""
    sent = 0
    for p in model.parameters():
        rows = p.shape[0] if p.dim() > 1 else 1
        cols = p.numel() // rows  # the hook views a matrix as (out, -1)
        compresses = p.dim() > 1 and (rows + cols) * rank * min_compression_rate < rows * cols  # torch's rule
        sent += (rows + cols) * rank if compresses else p.numel()
    return 4 * sent, 3


def powersgd_compressed(steps: int, start_iter: int = 1000) -> int:
    """How many of `steps` synchronised steps PowerSGD compresses: its hook runs the plain fp32 all-reduce
    while `PowerSGDState.iter < start_powerSGD_iter` (torch's default 1,000; its minimum with error
    feedback is 2). Defined in notebook 05_case2_where_time_goes."""
    return max(0, steps - start_iter)
