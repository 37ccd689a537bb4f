"""Notebook 06's claims, each decided by the run's (or a named record's) numbers.

Every function takes plain numbers and returns a `ddp_lessons.tool.verdict.Verdict`
(holds / does not hold / not resolvable here); the notebook prints it before
any sentence that relies on it. Defined in notebook 06_case2_breakeven.
"""

from __future__ import annotations

from ....tool import verdict
from ....tool.verdict import Verdict


def below_ceiling(speedups, ceiling: float, n: int = 2, what: str = "the fixed test") -> Verdict:
    """The measured speedups of n workers over 1 (one per interleaved round) all
    stay below a model's speedup: the model is read as a ceiling (what it leaves
    out, shared cores, caches and gloo's threads, only slows the workers). Defined in notebook 06_case2_breakeven."""
    return verdict.repeats(f"{n} workers stay below the own-cores model's speedup on {what}", speedups,
                           side="<", limit=ceiling, what="measured speedup per round",
                           numbers={"model": f"{ceiling:.3g}"})


def faster_step(name_a: str, a, name_b: str, b, where: str) -> Verdict:
    """Setup b's step is faster than a's, from per-round median step times of the same interleaved rounds.
    Defined in notebook 06_case2_breakeven."""
    return verdict.paired(f"a {name_b} step is faster than a {name_a} step ({where})", a, b, faster="b",
                          names=(name_a, name_b))


def gpus_win(speedups, n: int, width: int, what: str) -> Verdict:
    """The model's predicted speedup of n GPUs over one at `width` is above 1 for every
    row of a sensitivity table (`speedups`: one per row; a single value for one set of assumptions).
    Defined in notebook 06_case2_breakeven."""
    s = [float(x) for x in speedups]
    if not s:
        raise ValueError("gpus_win needs at least one predicted speedup")
    return verdict.interval(f"{n} GPUs beat one at width {width} ({what})", min(s), max(s), side=">", limit=1.0,
                            what=f"predicted speedup over {len(s)} row(s)")
