"""Host-bound GPU steps: the GPU idle, waiting for the host to give it work. Decided only from the GPU's
busy share: measured in the same run (the doctor profiles a few steps on a GPU), or read from a record's
profiler trace, which is a launch of its own and so only suspects it. Without either, the timer's own
marks say whether the device's queue was empty when each step began (`lag`, the device's delay behind the
host at the step's first mark): a fact, printed as such, that a busy share would decide. A step where the
host waits on the GPU (a sync every step) is not host-bound, whatever the marks say: that is said first.

Its seconds: the idle share of the compute (forward, backward and optimizer on the device, the data
stall, exposed all-reduce and the script's collectives left out, each charged elsewhere).
"""

from __future__ import annotations

import statistics

from . import advice
from .causes import HOST_BOUND
from .findings import _fmt, make
from .report import MEASURED, SUSPECTED

# A GPU busy under half of its steps is waiting for the host.
BUSY_HOST_BOUND = 0.5
# The device reached a step's first mark within 0.1 ms of the host issuing it: its queue was empty.
EMPTY_QUEUE_S = 1e-4
HOW = ("the doctor with --steps N profiles --profile-steps more steps after the N, on a GPU; or a torch.profiler "
       "window")


def same_run_busy(run) -> tuple[float, int] | None:
    """(busy share, steps) of the steps the doctor profiled after its measured window in this run (--steps on
    a GPU): the device's kernels, copies and sets over their span, synchronised at both ends (the most idle
    rank's share)."""
    shares = []
    for r in run:
        b = r.doctor.get("busy") or {}
        if b.get("busy_s") is not None and (b.get("span_s") or 0) > 0:
            shares.append((min(1.0, b["busy_s"] / b["span_s"]), int(b.get("steps") or 0)))
    return min(shares) if shares else None


def host_bound(ms, run, host_syncs: str | None) -> tuple[object, str | None]:
    """(finding, undecided line) for GPU steps."""
    if not run[0].on_gpu:
        return None, None
    same = same_run_busy(run)
    frac: float | None
    if same is not None:
        frac, n = same
        where = f"{n} steps of this run profiled after its measured ones (CUDA activity only)"
    else:
        traced = run.gpu_busy()
        frac = statistics.median(b["busy"] for b in traced) if traced else None
        n = len(traced or [])
        where = (f"{n} traced steps of a profiler trace of rank 0 that came with the record, a launch of its own "
                 "(not these steps), under torch.profiler (whose own host cost lowers a host-bound step's share)")
    if frac is not None:
        if frac >= BUSY_HOST_BOUND:
            return None, None
        per = [(1 - frac) * m.compute for m in ms]
        detail = (f"the GPU was busy {frac:.0%} of {where}: the phase times here are CUDA-event spans paced by the "
                  f"host, not GPU work; its idle share of the compute, s per rank: {_fmt(per)}")
        if host_syncs:
            detail += f"; the host also waited on the GPU every step in {host_syncs!r} (a sync: remove it first)"
        return make(HOST_BOUND, "", per, ms, detail, advice.FIXED["host_bound"],
                    status=MEASURED if same is not None else SUSPECTED), None
    if host_syncs:
        return None, (f"host-bound GPU steps: the host waited on the GPU every step in {host_syncs!r} (a sync), so "
                      "the marks cannot tell; remove the sync, then a GPU busy share decides (" + HOW + ")")
    empty = _empty_queue(run)
    if empty is None:
        return None, "host-bound GPU steps: no GPU busy share in this run (" + HOW + ")"
    return None, (f"host-bound GPU steps: the device's queue was empty at {empty:.0%} of the steps' starts (the "
                  "GPU had caught up with the host there"
                  + (", as a host-bound step's does" if empty >= 0.9 else "") +
                  "), but no busy share was measured in this run (" + HOW + ")")


def _empty_queue(run) -> float | None:
    """The share of steps (after the first two) whose first mark the device reached within EMPTY_QUEUE_S."""
    lags = [s.lag for r in run for s in r.steps(2) if s.lag is not None]
    return sum(x <= EMPTY_QUEUE_S for x in lags) / len(lags) if lags else None
