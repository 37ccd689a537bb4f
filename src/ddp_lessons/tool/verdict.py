"""Verdicts: a lesson's claim decided by the run's own numbers.

A sentence in a lesson that states a cause, a speed-up or a comparison follows a verdict: a function of
measured numbers that returns `HOLDS`, `FAILS` ("does not hold") or `UNRESOLVED` ("not resolvable here").
Every decision is an interval against a limit (`interval`): the measured quantity is known only as an
interval [low, high], the claim is "quantity > limit" (or "<"). `repeats`, `paired` and `separated` (by
quartiles) build the interval from repeats, `exact` decides a deterministic fact, `all_of` combines
claims. A `Verdict` prints two lines: the outcome, then the deciding numbers and the rule (`Verdict`).
A leaf of the ground floor: it imports only `spread`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from .spread import MIN_ROUNDS, chance_level, quartiles

HOLDS, FAILS, UNRESOLVED = "holds", "does not hold", "not resolvable here"
SIDES = (">", "<")


@dataclass(frozen=True)
class Verdict:
    """One claim decided: `status` is HOLDS, FAILS or UNRESOLVED; `numbers`
    the figures that decided it (name -> text); `rule` how.

    HOLDS: the claim is true by a margin the measurement's spread keeps; FAILS: the opposite is
    true by that margin; UNRESOLVED: the spread covers both, or there are too few repeats to know
    the spread. Printed as two lines, e.g.
        verdict: HOLDS - 2 ranks take longer per epoch than 1
          deciding numbers: ratio 2 ranks / 1 rank per round 1.21 .. 1.34 (5 rounds); rule: ...
    A verdict `worded` by the lesson's author prints that author's sentence for its outcome instead,
    and one short figure (`explain()` gives every number and the rule):
        verdict: On 2 CPU ranks an epoch takes longer than on 1: the answer to the post reproduces.
          deciding numbers: 1.21 .. 1.34 x per round
    The first line is what the lesson's text may rely on; nbval compares it (a verdict that flips
    on a rerun fails CI). The second carries the numbers that decide it and the rule; its figures
    change from run to run, so nbval_sanitize.cfg masks that line after its label, and only that line."""
    claim: str
    status: str
    numbers: dict = field(default_factory=dict)
    rule: str = ""
    says: dict = field(default_factory=dict)   # outcome -> the plain sentence printed for it (`worded`)
    figure: str = ""                           # the one short deciding figure printed beside it

    def __post_init__(self):
        if self.status not in (HOLDS, FAILS, UNRESOLVED):
            raise ValueError(f"Verdict status {self.status!r}: use one of {HOLDS!r}, {FAILS!r}, {UNRESOLVED!r}")
        if self.says and set(self.says) != {HOLDS, FAILS, UNRESOLVED}:
            raise ValueError("a worded verdict needs a sentence for each outcome: holds=, fails=, unresolved=")

    @property
    def sentence(self) -> str:
        """What the lesson may rely on: the author's sentence for this outcome, or the claim with its status."""
        return self.says.get(self.status) or f"{self.status.upper()} - {self.claim}"

    def explain(self) -> str:
        """Every deciding number and the rule (what `str` folds into one figure)."""
        nums = ", ".join(f"{k} {v}" for k, v in self.numbers.items())
        return f"{self.claim}: {self.status}; {nums}; rule: {self.rule}"

    @property
    def holds(self) -> bool:
        return self.status == HOLDS

    @property
    def fails(self) -> bool:
        return self.status == FAILS

    @property
    def resolved(self) -> bool:
        return self.status != UNRESOLVED

    def __bool__(self):
        raise TypeError("a Verdict has three outcomes: test .holds, .fails or .resolved, not its truth")

    def __str__(self) -> str:
        if self.says:  # a plain sentence, and one short figure (`explain()` has them all)
            figure = self.figure or next((f"{k} {v}" for k, v in self.numbers.items()), "")
            if "chance level" in self.numbers and self.resolved:  # what all rounds on one side means
                figure += f"; chance level {self.numbers['chance level']}"
            return f"verdict: {self.sentence}\n  deciding numbers: {figure}"
        nums = ", ".join(f"{k} {v}" for k, v in self.numbers.items())
        return (f"verdict: {self.status.upper()} - {self.claim}\n"
                f"  deciding numbers: {nums}; rule: {self.rule}")

    def _ipython_display_(self):
        # A verdict at the end of a notebook cell: printed once, as text (a stream, not a
        # display value: nbval compares the stream, and does not honour a trailing `;`).
        if not self.__dict__.get("_shown"):
            print(self)

    def show(self) -> "Verdict":
        """Print the verdict and return it; a cell that ends in `.show()` prints it once."""
        print(self)
        object.__setattr__(self, "_shown", True)
        return self


def worded(v: Verdict, *, holds: str, fails: str, unresolved: str | None = None, figure: str = "") -> Verdict:
    """`v` with the sentence a lesson prints for each outcome: each true for the outcome it reports and
    naming its subject (which setup, which machine); `unresolved` defaults to "This run cannot tell
    whether <claim>". `figure`: the one deciding figure printed beside it (default: the first number)."""
    unresolved = unresolved or f"This run cannot tell whether {v.claim} (inside the spread of its repeats)."
    return dataclasses.replace(v, says={HOLDS: holds, FAILS: fails, UNRESOLVED: unresolved}, figure=figure)


def _fmt(x, unit: str = "") -> str:
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    ax = abs(x)
    text = f"{x:.3g}" if ax < 1e4 else f"{x:.4g}"
    return f"{text}{(' ' + unit) if unit else ''}"


def interval(claim: str, low: float, high: float, *, side: str, limit: float,
             what: str = "value", unit: str = "", numbers: dict | None = None) -> Verdict:
    """Claim "`what` `side` `limit`" against the interval [low, high] in which
    the measured `what` lies (min-max of interleaved repeats, the per-round ratios
    of two setups, a median with a stated margin). HOLDS when the whole interval is on
    `side` of `limit`, FAILS when it is wholly on the other side, else UNRESOLVED (the
    limit lies inside).
    A deterministic fact (a count, a byte total) is an interval of width zero: `exact`."""
    if side not in SIDES:
        raise ValueError(f"side={side!r}: use '>' or '<'")
    if low > high:
        raise ValueError(f"interval low {low} > high {high}: pass (min, max)")
    above, below = low > limit, high < limit
    claimed, other = (above, below) if side == ">" else (below, above)
    status = HOLDS if claimed else FAILS if other else UNRESOLVED
    nums = {what: f"{_fmt(low, unit)} .. {_fmt(high, unit)}" if low != high else _fmt(low, unit)}
    nums.update(numbers or {})
    rule = (f"holds when all of {what} {side} {_fmt(limit, unit)}, does not hold when all of it is on "
            f"the other side, else not resolvable")
    return Verdict(claim, status, nums, rule)


def repeats(claim: str, values, *, side: str, limit: float, what: str = "value", unit: str = "",
            min_repeats: int = MIN_ROUNDS, numbers: dict | None = None) -> Verdict:
    """Claim "`what` `side` `limit`" from repeated measurements `values`:
    the interval is their min .. max. Fewer than `min_repeats` values
    (None ones dropped) resolve nothing: one run has no known spread."""
    v = [float(x) for x in values if x is not None]
    if len(v) < min_repeats:
        nums = {what: ", ".join(_fmt(x, unit) for x in v) or "none", "repeats": str(len(v))}
        nums.update(numbers or {})
        return Verdict(claim, UNRESOLVED, nums, f"needs at least {min_repeats} repeats to know the spread")
    # all of them on one side of the limit by chance, were the quantity at the limit: printed beside the numbers
    nums = {"chance level": f"{chance_level(len(v)):.0%}"} | (numbers or {})
    return interval(claim, min(v), max(v), side=side, limit=limit, what=f"{what} (min .. max of {len(v)})",
                    unit=unit, numbers=nums)


def paired(claim: str, a, b, *, faster: str = "b", names: tuple[str, str] = ("A", "B"),
           min_rounds: int = MIN_ROUNDS, numbers: dict | None = None) -> Verdict:
    """Claim "setup `faster` takes less time than the other", from two setups
    timed in the same interleaved rounds (`a[i]`, `b[i]`: round i's times;
    None = a failed round, left out). Decided on the per-round ratios b / a
    (the sign test of `spread.verdict`): all below 1 means B is faster."""
    if faster not in ("a", "b"):
        raise ValueError(f"faster={faster!r}: use 'a' or 'b'")
    a, b = list(a), list(b)
    if a and b and len(a) != len(b):
        raise ValueError(f"paired: {len(a)} rounds of {names[0]} against {len(b)} of {names[1]}: give one value "
                         "per round to each (None for a failed round), or decide unpaired with `separated`")
    pairs = [(float(x), float(y)) for x, y in zip(a, b) if x is not None and y is not None]  # noqa: B905 - one side may be empty
    ratios = [y / x for x, y in pairs]
    what = f"{names[1]}/{names[0]} per round"
    side = "<" if faster == "b" else ">"
    return repeats(claim, ratios, side=side, limit=1.0, what=what, min_repeats=min_rounds, numbers=numbers)


def separated(claim: str, a, b, *, faster: str = "b", names: tuple[str, str] = ("A", "B"),
              min_repeats: int = MIN_ROUNDS, numbers: dict | None = None) -> Verdict:
    """Claim "setup `faster` takes less time", from the repeats of two setups
    (interleaved, not necessarily paired): the ratio b / a is known as the
    interval [Q1(b) / Q3(a), Q3(b) / Q1(a)] of their quartiles. One disturbed
    repeat moves a quartile little, where it breaks a sign test over rounds;
    the price is that the middle halves of the two setups must not overlap."""
    if faster not in ("a", "b"):
        raise ValueError(f"faster={faster!r}: use 'a' or 'b'")
    a = [float(x) for x in a if x is not None]
    b = [float(x) for x in b if x is not None]
    what = f"{names[1]}/{names[0]} (quartile bounds)"
    if min(len(a), len(b)) < min_repeats:
        return repeats(claim, [], side="<", limit=1.0, what=what, min_repeats=min_repeats, numbers=numbers)
    qa, qb = quartiles(a), quartiles(b)
    nums = {"medians": f"{_fmt(qa[1])} vs {_fmt(qb[1])}", "repeats": f"{len(a)}, {len(b)}"}
    nums.update(numbers or {})
    return interval(claim, qb[0] / qa[2], qb[2] / qa[0], side="<" if faster == "b" else ">", limit=1.0,
                    what=what, numbers=nums)


def exact(claim: str, value, *, expected=None, side: str | None = None, limit=None,
          what: str = "value", unit: str = "", numbers: dict | None = None) -> Verdict:
    """A deterministic fact: `value == expected`, or `value side limit`, with
    no spread to allow for (counts, bytes, shapes, equal results)."""
    if (expected is None) == (side is None):
        raise ValueError("exact: pass expected=... or side=... with limit=...")
    if side is not None:
        if side not in SIDES:
            raise ValueError(f"side={side!r}: use '>' or '<'")
        ok = value > limit if side == ">" else value < limit
        rule = f"holds when {what} {side} {_fmt(limit, unit)} (exact, no spread)"
    else:
        ok = value == expected
        shown = expected if isinstance(expected, (list, tuple, dict, set)) else _fmt(expected, unit)
        rule = f"holds when {what} == {shown} (exact)"
    nums = {what: _fmt(value, unit) if isinstance(value, (int, float)) else str(value)}
    nums.update(numbers or {})
    return Verdict(claim, HOLDS if ok else FAILS, nums, rule)


def all_of(claim: str, *parts: Verdict) -> Verdict:
    """A claim made of several: HOLDS when every part holds, FAILS when any
    part fails, else UNRESOLVED. The parts' numbers are kept, prefixed."""
    if not parts:
        raise ValueError("all_of needs at least one verdict")
    status = FAILS if any(p.fails for p in parts) else HOLDS if all(p.holds for p in parts) else UNRESOLVED
    nums = {"parts": "; ".join(f"{p.claim}: {p.status}" for p in parts)}
    for p in parts:  # a figure several parts share is printed once
        for k, v in p.numbers.items():
            nums.setdefault(k if k not in nums or nums[k] == v else f"{k} ({p.claim})", v)
    return Verdict(claim, status, nums, "holds when every part holds, does not hold when any part does not")
