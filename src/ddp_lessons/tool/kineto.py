"""How busy the GPU was in the steps a torch.profiler trace holds (the Chrome-trace JSON that
`export_chrome_trace` or `tensorboard_trace_handler` writes, gzipped or not).

Per `ProfilerStep#N` (the host-side span the profiler's schedule marks), the union of the GPU's
kernels, copies and sets inside it, over the span: a GPU busy 6% of its steps is waiting for the
host to give it work (host-bound), whatever the CUDA events around each phase say.
A leaf of the tool: it imports nothing from ddp_lessons.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def _union(intervals) -> float:
    total, cur = 0.0, None
    for a, b in sorted(intervals):
        if cur is None or a > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (cur[1] - cur[0] if cur else 0.0)


def busy_per_step(events) -> list[dict]:
    """[{"step", "span_s", "busy_s", "busy"}] for each host-side ProfilerStep of a trace's events."""
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep")
             and e.get("cat") == "user_annotation" and "dur" in e]
    work = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("cat") in GPU_WORK and "ts" in e]
    out = []
    for s in sorted(steps, key=lambda e: e["ts"]):
        a, b = s["ts"], s["ts"] + s["dur"]
        busy = _union((max(a, x), min(b, y)) for x, y in work if x < b and y > a)
        out.append({"step": s["name"], "span_s": s["dur"] / 1e6, "busy_s": busy / 1e6,
                    "busy": busy / s["dur"] if s["dur"] else 0.0})
    return out


def read(path) -> list[dict]:
    """The per-step GPU busy fractions of the trace at `path` (a file, or a folder of traces:
    the first one, by name)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("*.json.gz")) + sorted(p.glob("*.json"))
        if not files:
            return []
        p = files[0]
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt") as f:
        return busy_per_step(json.load(f).get("traceEvents", []))
