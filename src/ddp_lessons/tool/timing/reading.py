"""Reading a timer's result: a rank's timed steps and account, the median step,
and DDP's own per-iteration timings (a cross-check of the all-reduce numbers).

A worker returns `timer.result()` itself, or a dict holding it under "timer"
(`KEY`); the readers here take either, so a cell says what it reads, e.g.
`timed_steps(ranks[0], skip=2)`, not a chain of subscripts."""

from __future__ import annotations

import statistics

# Per-step numbers that are positions or labels, not durations: no median of them.
NOT_DURATIONS = ("step", "t_start", "wait_for")
KEY = "timer"  # where a worker's dict holds its StepTimer result


def timer_result(value) -> dict | None:
    """The StepTimer result in one rank's value: the value itself, or value["timer"]; None if neither.
    Defined in notebook 01_case1_broken."""
    if isinstance(value, dict) and "steps" in value:
        return value
    if isinstance(value, dict) and isinstance(value.get(KEY), dict) and "steps" in value[KEY]:
        return value[KEY]
    return None


def _result(value) -> dict:
    res = timer_result(value)
    if res is None:
        raise ValueError(f"no StepTimer result here: return timer.result(), or a dict with it under {KEY!r}, "
                         "from the worker")
    return res


def timed_steps(value, skip: int = 0) -> list[dict]:
    """One rank's timed steps, leaving out the first `skip` (warm-up). Defined in notebook 00_first_launch."""
    return _result(value)["steps"][skip:]


def rank_account(value) -> dict:
    """Where all of one rank's time went (startup, steps, outside work, remainder).
    Defined in notebook 07_diagnose_your_own_run."""
    return _result(value)["account"]


def median_step(value, skip: int = 2) -> dict:
    """Median of every per-step number of one rank, leaving out the first `skip`
    steps (DDP rebuilds its buckets after the first iteration; warm-up).

    Every key any kept step has, each over the steps that have it; {} for a
    rank without steps. Defined in notebook 00_first_launch."""
    every = _result(value)["steps"]
    steps = every[skip:] or every
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
