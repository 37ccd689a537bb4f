"""All-reduce over message sizes: latency, bandwidth, and a fitted cost model.

Definitions as nccl-tests gives them (its doc/PERFORMANCE.md):
  algbw = bytes / time
  busbw = algbw * 2 (n - 1) / n      for all-reduce on n ranks,
the second being comparable with the link's bandwidth whatever n is.
The fitted model is time(bytes) = latency + bytes / bandwidth, where
`bandwidth` is an algorithm bandwidth (multiply by 2(n-1)/n for busbw).
Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from . import runtime
from .launcher import report_progress


def default_sizes(lo: int = 4 * 1024, hi: int = 64 * 2**20, per_octave: int = 1) -> list[int]:
    """Message sizes in bytes, powers of two from `lo` to `hi`. Defined in notebook 00_first_launch."""
    sizes: list[int] = []
    s: float = lo
    while s <= hi:
        sizes.append(int(s))
        s *= 2 ** (1 / per_octave)
    return sizes


def sweep(sizes, iters: int = 20, warmup: int = 3, dtype=torch.float32) -> dict:
    """Worker: time `iters` all-reduces of each size; every rank returns its times.

    On GPUs the times come from CUDA events around each call (one sync per
    size, after the loop); on gloo from the host clock, since a gloo
    all-reduce returns only when it has completed. Defined in notebook 00_first_launch."""
    dev = runtime.device()
    cuda = dev.type == "cuda"
    out: dict = {"rank": dist.get_rank(), "world_size": dist.get_world_size(),
           "backend": dist.get_backend(), "sizes": [], "iters": []}
    elem = torch.tensor([], dtype=dtype).element_size()
    for k, nbytes in enumerate(sizes):
        buf = torch.ones(max(1, nbytes // elem), dtype=dtype, device=dev)
        for _ in range(warmup):
            dist.all_reduce(buf)
        dist.barrier()  # start every size together
        times = _time_cuda(buf, iters) if cuda else _time_host(buf, iters)
        out["sizes"].append(buf.numel() * elem)
        out["iters"].append(times)
        report_progress(k + 1, len(sizes))
    return out


def _time_host(buf, iters):
    # Each call is timed on each rank, with no barrier between calls: a rank that arrives late makes
    # its peers' interval longer by its lateness (nccl-tests times the whole loop instead). The
    # summary's best iteration and median are little affected; its p90 includes that skew.
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        times.append(time.perf_counter() - t0)
    return times


def _time_cuda(buf, iters):
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for a, b in evs:
        a.record()
        dist.all_reduce(buf)
        b.record()
    torch.cuda.synchronize()  # note: one CPU-GPU sync per message size
    return [a.elapsed_time(b) / 1e3 for a, b in evs]


def summarize(rank_results: list[dict]) -> list[dict]:
    """Per size: median over iterations of the slowest rank's time, algbw, busbw;
    also the p90 and the best iteration (what the link does without scheduler noise).
    Defined in notebook 00_first_launch."""
    n = rank_results[0]["world_size"]
    rows = []
    for i, nbytes in enumerate(rank_results[0]["sizes"]):
        # An all-reduce is done when the last rank is done: take the max over ranks.
        per_iter = [max(r["iters"][i][j] for r in rank_results) for j in range(len(rank_results[0]["iters"][i]))]
        t = statistics.median(per_iter)
        p90 = sorted(per_iter)[int(0.9 * (len(per_iter) - 1))]
        algbw = nbytes / t
        rows.append({"bytes": nbytes, "time": t, "p90": p90, "best": min(per_iter), "algbw": algbw,
                     "busbw": algbw * 2 * (n - 1) / n if n > 1 else 0.0})
    return rows


def fit_latency_bandwidth(rows: list[dict]) -> dict:
    """Least-squares fit of time = latency + bytes / bandwidth, in relative error.

    Weighting each point by 1/time keeps the small, latency-bound sizes from
    being drowned by the large ones. Returns latency (s), bandwidth (algbw,
    B/s), the largest relative error of the fit over the points, and whether
    each term was resolvable from these sizes: the bytes term must be at least
    RESOLVED of the largest size's time (else every size was latency-bound and
    the bandwidth is noise), the latency at least RESOLVED of the smallest's. Defined in notebook 00_first_launch."""
    xs = [r["bytes"] for r in rows]
    ys = [r["time"] for r in rows]
    w = [1.0 / y for y in ys]
    # Weighted normal equations for y = a + b x.
    sw = sum(wi * wi for wi in w)
    sx = sum(wi * wi * x for wi, x in zip(w, xs, strict=True))
    sy = sum(wi * wi * y for wi, y in zip(w, ys, strict=True))
    sxx = sum(wi * wi * x * x for wi, x in zip(w, xs, strict=True))
    sxy = sum(wi * wi * x * y for wi, x, y in zip(w, xs, ys, strict=True))
    b = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)
    a = (sy - b * sx) / sw
    a, b = max(a, 0.0), max(b, 1e-30)
    err = max(abs(a + b * x - y) / y for x, y in zip(xs, ys, strict=True))
    big, small = max(range(len(xs)), key=xs.__getitem__), min(range(len(xs)), key=xs.__getitem__)
    return {"latency": a, "bandwidth": 1.0 / b, "max_rel_error": err,
            "bandwidth_resolved": b * xs[big] >= RESOLVED * ys[big],
            "latency_resolved": a >= RESOLVED * ys[small]}


RESOLVED = 0.1  # a term of the fit below this share of the time it should explain is noise


def describe_fit(fit: dict) -> str:
    """The fit in words, saying which term these sizes could not resolve."""
    lat = f"latency {fit['latency'] * 1e6:.1f} us" if fit.get("latency_resolved", True) else \
        "latency not resolvable (every size was bandwidth-bound: add smaller ones)"
    bw = f"bandwidth {fit['bandwidth'] / 1e9:.2f} GB/s (algbw)" if fit.get("bandwidth_resolved", True) else \
        "bandwidth not resolvable (every size was latency-bound: add larger ones, e.g. --max-bytes 67108864)"
    return f"fit: {lat}, {bw}"


# -- the one cost model: time = latency + bytes / algbw -------------------------
def predict_time(nbytes: float, fit: dict) -> float:
    """All-reduce time the model gives for a message of `nbytes`, from a fit
    (`fit_latency_bandwidth`: latency in s, `bandwidth` an algbw in B/s). Defined in notebook 00_first_launch."""
    return fit["latency"] + nbytes / fit["bandwidth"]


def algbw_from_busbw(busbw: float, world: int) -> float:
    """The algbw an all-reduce on `world` ranks reaches at bus bandwidth `busbw`."""
    return busbw * world / (2 * (world - 1))


def estimate(nbytes: float, busbw: float, latency: float = 0.0, world: int = 2) -> float:
    """The same model from a link's bus bandwidth (nccl-tests' busbw, what a
    datasheet or a ring gives): latency + bytes * 2(n-1)/n / busbw."""
    return predict_time(nbytes, {"latency": latency, "bandwidth": algbw_from_busbw(busbw, world)})
