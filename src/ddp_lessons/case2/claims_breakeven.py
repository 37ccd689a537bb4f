"""Notebook 06's claims, each decided by the run's (or a named record's) numbers.

Every function takes plain numbers and returns a `ddp_lessons.verdict.Verdict`
(holds / does not hold / not resolvable here); the notebook prints it before
any sentence that relies on it. Defined in notebook 06_case2_breakeven.
"""

from __future__ import annotations

from .. import verdict
from ..verdict import FAILS, HOLDS, UNRESOLVED, Verdict


def workers_win(one, n_workers, n: int = 2, what: str = "the fixed test") -> Verdict:
    """n workers get through `what` faster than 1: per-round ratios (n / 1) of the time
    each takes for the same work (a wall time, or the time per batch of samples), interleaved rounds."""
    return verdict.paired(f"{n} workers get through {what} faster than 1", one, n_workers, faster="b",
                          names=("1 worker", f"{n} workers"))


def model_picks_winner(model: str, predicted: float, measured: Verdict) -> Verdict:
    """The model's predicted speedup (> 1: the workers win) names the winner that
    the measured verdict (`workers_win`) found; not resolvable when the measurement is not."""
    claim = f"the {model} model predicts the winner the measurement finds"
    nums = {"predicted speedup": f"{predicted:.3g}", "measurement": measured.status}
    nums.update({f"measured {k}": v for k, v in measured.numbers.items()})
    rule = "holds when (predicted speedup > 1) agrees with the measured verdict; not resolvable when that is"
    if not measured.resolved:
        return Verdict(claim, UNRESOLVED, nums, rule)
    return Verdict(claim, HOLDS if (predicted > 1.0) == measured.holds else FAILS, nums, rule)


def faster_step(name_a: str, a, name_b: str, b, where: str) -> Verdict:
    """Setup b's step is faster than a's, from per-round median step times of the same interleaved rounds."""
    return verdict.paired(f"a {name_b} step is faster than a {name_a} step ({where})", a, b, faster="b",
                          names=(name_a, name_b))


def gpus_win(speedups, n: int, width: int, what: str) -> Verdict:
    """The model's predicted speedup of n GPUs over one at `width` is above 1 for every
    row of a sensitivity table (`speedups`: one per row; a single value for one set of assumptions)."""
    s = [float(x) for x in speedups]
    if not s:
        raise ValueError("gpus_win needs at least one predicted speedup")
    return verdict.interval(f"{n} GPUs beat one at width {width} ({what})", min(s), max(s), side=">", limit=1.0,
                            what=f"predicted speedup over {len(s)} row(s)")
