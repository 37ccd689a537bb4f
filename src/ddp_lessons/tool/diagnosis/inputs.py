"""What `diagnose` and `compare` read: the per-rank timer results of one run.

The convention: a run is what `launch` or `run` returned (one value per rank,
in rank order), where each rank's value is either `StepTimer.result()` itself
or a dict holding it under "timer" (`timing.KEY`); or a saved record (a dict with a schema, or a record's name or path
for `records.load`) whose "results" is such a list or a dict holding one
under "ranks". A timer result is a dict with "steps" (and, from timers that
account for all of a rank's time, "account").
"""

from __future__ import annotations

from pathlib import Path

from ..timing import KEY, timer_result as _timer_result


def rank_results(run) -> list[dict]:
    """The timer results of one run, in rank order; a one-line ValueError for anything else."""
    if isinstance(run, (str, Path)):
        from .. import records
        run = records.load(run)
    record = None
    if isinstance(run, dict) and "schema" in run:
        record = f"the record ({run.get('kind')!r}, made {run.get('created')})"
        run = run.get("results")
        if isinstance(run, dict):
            run = run.get("ranks", run)
    if isinstance(run, dict) and _timer_result(run) is not None:
        run = [run]
    no_timer = not isinstance(run, (list, tuple)) or not run or any(_timer_result(v) is None for v in run)
    if record and no_timer:
        raise ValueError(f"{record} holds no StepTimer result per rank: diagnose reads runs whose workers were "
                         "timed with StepTimer (records of case1, case2 or train-mlp, for instance)")
    if not isinstance(run, (list, tuple)) or not run:
        raise ValueError("pass what launch/run returned (one value per rank), a record, or a record's name; "
                         f"got {type(run).__name__}")
    out = [_timer_result(v) for v in run]
    missing = [i for i, v in enumerate(out) if v is None]
    if missing:
        raise ValueError(f"value {missing[0]} holds no timer result: return timer.result(), or a dict "
                         f"with it under {KEY!r}, from the worker")
    return sorted(out, key=lambda r: r.get("rank", 0))


def repeats(run) -> list[list[dict]]:
    """A run given as repeats (a list of runs) or as one run: a list of runs."""
    if isinstance(run, (list, tuple)) and run and isinstance(run[0], (list, tuple)):
        return [rank_results(r) for r in run]
    return [rank_results(run)]
