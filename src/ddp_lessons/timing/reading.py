"""Reading a timer's result: the median step of one rank, and DDP's own
per-iteration timings (a cross-check of the timer's all-reduce numbers)."""

from __future__ import annotations

import statistics

# Per-step numbers that are positions or labels, not durations: no median of them.
NOT_DURATIONS = ("step", "t_start", "wait_for")


def median_step(times: dict, skip: int = 2) -> dict:
    """Median of every per-step number of one rank, leaving out the first `skip`
    steps (DDP rebuilds its buckets after the first iteration; warm-up).

    Every key any kept step has, each over the steps that have it; {} for a
    rank without steps."""
    steps = times["steps"][skip:] or times["steps"]
    keys = dict.fromkeys(k for s in steps for k, v in s.items()
                         if k not in NOT_DURATIONS and isinstance(v, (int, float)) and not isinstance(v, bool))
    return {k: statistics.median(v for s in steps if isinstance(v := s.get(k), (int, float)))
            for k in keys}


def ddp_logging_times(ddp_model) -> dict:
    """DDP's own per-iteration timings (seconds), from its private logging data.

    Call `ddp_model._set_ddp_runtime_logging_sample_rate(1)` right after
    wrapping to sample every step. DDP reports step k at the start of step k+1.
    Exposed = backward_comm_time - backward_compute_comm_overlap_time.
    """
    data = ddp_model._get_ddp_logging_data()
    ns = {k: data.get(k, 0) / 1e9 for k in ("forward_compute_time", "backward_compute_time",
                                             "backward_comm_time", "backward_compute_comm_overlap_time")}
    ns["exposed"] = ns["backward_comm_time"] - ns["backward_compute_comm_overlap_time"]
    return ns
