"""Notebook 06's claims, each decided by the run's (or a named record's) numbers.

Every function takes plain numbers and returns a worded `ddp_lessons.tool.verdict.Verdict`
(holds / does not hold / not resolvable here) whose sentence names its subject (this machine, the
recorded GPU, or the model) for every outcome. Defined in notebook 06_case2_breakeven.
"""

from __future__ import annotations

from ....tool import verdict
from ....tool.verdict import Verdict
from .runs import ratio_figure


def below_ceiling(speedups, ceiling: float, n: int = 2, what: str = "the fixed test") -> Verdict:
    """The measured speedups of n workers over 1 (one per interleaved round) all
    stay below a model's speedup: the model is read as a ceiling (what it leaves
    out, shared cores, caches and gloo's threads, only slows the workers). Defined in notebook 06_case2_breakeven."""
    s = [float(x) for x in speedups if x is not None]
    v = verdict.repeats(f"{n} workers stay below the own-cores model's speedup on {what}", s,
                        side="<", limit=ceiling, what="measured speedup per round",
                        numbers={"model": f"{ceiling:.3g}"})
    return verdict.worded(
        v, holds=f"On this machine {n} workers stayed below the own-cores model's speedup in every round on {what}: "
                 "the model reads as a ceiling here.",
        fails=f"On this machine {n} workers beat the own-cores model's speedup in every round on {what}: it is no "
              "ceiling here.",
        unresolved=f"On this machine the rounds on {what} fall on both sides of the own-cores model's speedup, or too "
                   "few ran: this run cannot tell whether it is a ceiling.",
        figure=(f"measured {min(s):.2f} .. {max(s):.2f}x against the model's {ceiling:.2f}x" if s else "no round"))


def faster_step(name_a: str, a, name_b: str, b, where: str) -> Verdict:
    """Setup b's step is faster than a's, from per-round median step times of the same interleaved rounds.
    `where`: the machine, named in the sentence ('the recorded H200'). Defined in notebook 06_case2_breakeven."""
    v = verdict.paired(f"a {name_b} step is faster than a {name_a} step ({where})", a, b, faster="b",
                       names=(name_a, name_b))
    return verdict.worded(
        v, holds=f"On {where} the {name_b} step was faster than the {name_a} step in every round.",
        fails=f"On {where} the {name_b} step was slower than the {name_a} step in every round.",
        unresolved=f"On {where} the rounds disagree, or too few ran: the record cannot tell whether the {name_b} "
                   f"step is faster than the {name_a} step.",
        figure=ratio_figure(a, b, f"{name_b} / {name_a} per round"))


def gpus_win(speedups, n: int, width: int, what: str) -> Verdict:
    """The model's predicted speedup of n GPUs over one at `width` is above 1 for every
    row of a sensitivity table (`speedups`: one per row; a single value for one set of assumptions).
    `what`: which step each side runs, named in the sentence. Defined in notebook 06_case2_breakeven."""
    s = [float(x) for x in speedups]
    if not s:
        raise ValueError("gpus_win needs at least one predicted speedup")
    v = verdict.interval(f"{n} GPUs beat one at width {width} ({what})", min(s), max(s), side=">", limit=1.0,
                         what=f"predicted speedup over {len(s)} row(s)")
    rows = "every link row of the table" if len(s) > 1 else "its link assumption"
    return verdict.worded(
        v, holds=f"In the model ({what}), {n} GPUs beat one at width {width} under {rows}.",
        fails=f"In the model ({what}), {n} GPUs lose to one at width {width} under {rows}.",
        unresolved=f"In the model ({what}), whether {n} GPUs beat one at width {width} depends on the link: some "
                   "rows win, some lose.",
        figure=f"predicted speedup {min(s):.2f} .. {max(s):.2f} over {len(s)} row(s)")
