"""The GPU's busy share of a few steps, measured in the same run: torch.profiler with CUDA activity only
(no CPU operators recorded), started after --steps' window (CUDA's profiler callbacks stay on once started)
and stopped a few optimizer steps later, the device synchronised at both ends. What comes back is the
union of the device's kernels, copies and sets over that span (`diagnosis.host`). A profiler that cannot
start (no CUPTI, another profiler running) leaves the share unknown, never the run broken.
"""

from __future__ import annotations

import time


def start_after(rec) -> None:
    """After --steps' window (the rank's result written): profile `rec.settings.profile` more steps."""
    import torch
    torch.cuda.synchronize()   # note: CPU-GPU sync point, after the measured window only
    rec.profiled, rec.profile_t0 = 0, time.perf_counter()
    rec.profiler = start()
    if rec.profiler is None:
        _write(rec, {"error": "the profiler could not start"})
        rec.exit_now = True


def tick(rec) -> None:
    """An optimizer step of the profiled ones: after the last, the busy share into the rank's file."""
    rec.profiled += 1
    if rec.profiled < rec.settings.profile:
        return
    import torch
    torch.cuda.synchronize()   # note: CPU-GPU sync point: the profiled steps' end
    span = time.perf_counter() - rec.profile_t0
    prof, rec.profiler = rec.profiler, None
    _write(rec, {**stop(prof), "span_s": span, "steps": rec.profiled, "after_window": True})
    rec.exit_now = True


def _write(rec, busy: dict) -> None:
    if rec.written is not None:
        rec.wire.update_report(rec.written, busy=busy)


def start():
    """A started profiler, or None where one cannot run here."""
    try:
        from torch.profiler import ProfilerActivity, profile
        prof = profile(activities=[ProfilerActivity.CUDA])
        prof.start()
        return prof
    except Exception:  # noqa: BLE001 - no profiler: the share stays unknown
        return None


def stop(prof) -> dict:
    """{"busy_s", "device_events"} of a profiler `start` returned (or {"error"})."""
    if prof is None:
        return {"error": "the profiler could not start"}
    try:
        prof.stop()
        events = prof.profiler.kineto_results.events()
        spans = [(e.start_ns(), e.start_ns() + e.duration_ns()) for e in events if _on_device(e)]
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}
    return {"busy_s": union(spans) / 1e9, "device_events": len(spans)}


def _on_device(e) -> bool:
    try:
        return "CUDA" in str(e.device_type()) and e.duration_ns() > 0
    except Exception:  # noqa: BLE001
        return False


def union(spans) -> float:
    """The length covered by (start, end) intervals."""
    total, cur = 0.0, None
    for a, b in sorted(spans):
        if cur is None or a > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (cur[1] - cur[0] if cur else 0.0)
