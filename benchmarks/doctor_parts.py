"""What each of the doctor's per-step parts costs the host on this machine, one part at a time, in one process:
a mark on its clock (a CUDA event from the ring on a GPU, perf_counter on CPUs), the counting wrapper around
every hook, and the compute-end callback on a backward: the doctor's (a pre-hook registered once, armed by a
flag) and the per-step one it falls back to (a pre-hook put on each forward's output), each against a
backward without, interleaved in blocks. Beside benchmarks/doctor_cost.py, which
measures the whole against the command alone: these say where that cost goes.

    PYTHONPATH=$PWD/src python3 benchmarks/doctor_parts.py [--cuda] [--out parts.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch import nn

from ddp_lessons.tool import spread
from ddp_lessons.tool.timing import clocks, compute_end


def per_call(fn, n: int, repeats: int = 7) -> float:
    """Median seconds per call of `fn` over `repeats` blocks of `n` calls."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t0) / n)
    return statistics.median(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cuda", action="store_true")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--out", metavar="FILE")
    a = p.parse_args()
    dev = torch.device("cuda" if a.cuda else "cpu")
    res: dict = {"device": torch.cuda.get_device_name() if a.cuda else "cpu", "torch": torch.__version__}
    clock = clocks.cuda_clock(dev, 16384) if a.cuda else clocks.HostClock()
    res["mark_us"] = per_call(clock.mark, 2000) * 1e6    # 7 x 2000 marks: inside one 16384 ring, no read

    total = [0.0, 0]

    def timed(fn):   # the doctor's counting wrapper (rank/inject.timed), on a no-op
        c = time.perf_counter

        def wrapper(*x, **k):
            t0 = c()
            try:
                return fn(*x, **k)
            finally:
                total[0] += c() - t0
                total[1] += 1
        return wrapper
    res["timed_noop_us"] = per_call(timed(lambda: None), 20000) * 1e6

    layers: list = [nn.Linear(16, a.width), nn.ReLU()]
    for _ in range(a.depth - 1):
        layers += [nn.Linear(a.width, a.width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(a.width, 1)).to(dev)
    x = torch.randn(256, 16, device=dev)

    marker = compute_end.EndMarker(model, clock.mark)

    def backward(how: str):
        out = model(x)
        if how == "marker":
            marker.arm(out)
        elif how == "per_step":
            compute_end.arm(clock.mark, out)
        out.sum().backward()
    hows = ["plain", "marker", "per_step"]
    for how in hows:
        backward(how)
    blocks: dict = {h: [] for h in hows}
    for order in spread.interleave(hows, 12):   # blocks of 200 forward-backwards, host time (ends synchronised)
        for how in order:
            if a.cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(200):
                backward(how)
            if a.cuda:
                torch.cuda.synchronize()
            blocks[how].append((time.perf_counter() - t0) / 200)
    res["step_us"] = statistics.median(blocks["plain"]) * 1e6
    for how in hows[1:]:
        diffs = [b - p for p, b in zip(blocks["plain"], blocks[how], strict=True)]
        res[f"compute_end_{how}_us"] = statistics.median(diffs) * 1e6
        res[f"compute_end_{how}_us_95"] = [d * 1e6 for d in spread.median_interval(diffs) or ()]
    res["marker_fell_back"] = marker.per_step
    print(json.dumps(res, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
