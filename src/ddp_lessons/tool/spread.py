"""Statistics of repeated timings: the spread of one run, the order of
interleaved runs, and whether two setups' difference is larger than their
repeats' spread.

`summary(values)`: median, quartiles, IQR, min, max; `interleave(names, rounds)`: the running order
of every round, so no setup always runs first or after the same one; `compare_rounds(a, b)`: per-round
ratios b / a of two setups timed in the same rounds, and a `verdict` by the sign test of `VERDICT_RULE`;
`median_interval(values)`: a distribution-free interval for their median.
A leaf of the package: it imports nothing from ddp_lessons.
"""

from __future__ import annotations

import statistics
from math import comb

# With no real difference, all of n rounds land on one side by chance with probability 2 / 2**n
# (`chance_level`): 25% for 3 rounds, 6% for 5, 0.2% for 10. Fewer than 5 decide nothing.
MIN_ROUNDS = 5
STEADY_IQR = 0.05   # a run is steady when its steps' IQR is at most 5% of their median
B_FASTER, A_FASTER = "B faster", "A faster"
INSIDE = "not resolvable: difference inside the rounds' spread"
TOO_FEW = "not resolvable: fewer than {} paired rounds"
VERDICT_RULE = (f"per round, ratio = B / A of the two setups' values (median step times); "
                f"'{B_FASTER}' when every ratio < 1, '{A_FASTER}' when every ratio > 1, "
                f"else '{INSIDE}' (1 within [min, max] of the ratios); "
                f"fewer than {MIN_ROUNDS} paired rounds: '{TOO_FEW.format(MIN_ROUNDS)}'")
STEADY_RULE = (f"a run is steady when the IQR of its step times after the warm-up steps "
               f"is at most {STEADY_IQR:.0%} of their median")


def quartiles(values) -> tuple[float, float, float]:
    """(Q1, median, Q3), interpolated linearly between order statistics
    (numpy's default; `statistics.quantiles(method='inclusive')`)."""
    v = sorted(float(x) for x in values)
    if not v:
        raise ValueError("quartiles of no values")
    if len(v) == 1:
        return v[0], v[0], v[0]
    q1, q2, q3 = statistics.quantiles(v, n=4, method="inclusive")
    return q1, q2, q3


def summary(values) -> dict:
    """n, median, q1, q3, iqr, iqr_rel (IQR / median), min, max of `values`.
    Defined in notebook 06_case2_breakeven."""
    v = [float(x) for x in values]
    q1, med, q3 = quartiles(v)
    return {"n": len(v), "median": med, "q1": q1, "q3": q3, "iqr": q3 - q1,
            "iqr_rel": (q3 - q1) / med if med else float("inf"), "min": min(v), "max": max(v)}


def steady(values, limit: float = STEADY_IQR) -> bool:
    """True when the IQR of `values` is at most `limit` times their median."""
    return summary(values)["iqr_rel"] <= limit


def interleave(names, rounds: int) -> list[list[str]]:
    """The running order of `rounds` rounds of `names`: round r is the list
    rotated by r // 2, reversed when r is odd. Two names give A B, B A, B A,
    A B, A B, ...; every name comes first or last as often as the others. Defined in notebook 02_case1_answer."""
    names = list(names)
    order = []
    for r in range(rounds):
        k = (r // 2) % len(names) if names else 0
        row = names[k:] + names[:k]
        order.append(row[::-1] if r % 2 else row)
    return order


def chance_level(n: int) -> float:
    """The probability that all of `n` paired rounds fall on one side (either side) when the two
    setups do not differ: the sign test's two-sided p-value at its most extreme outcome."""
    return min(1.0, 2.0 * 0.5 ** n) if n > 0 else 1.0


def median_interval(values, level: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free interval for the median of `values` (the sign test's: between the k-th smallest
    and the k-th largest, k the largest with P(Binomial(n, 1/2) < k) <= (1 - level) / 2); None where n is
    too small for `level` (fewer than 6 values at 95%)."""
    v = sorted(float(x) for x in values)
    n, tail, k, cum = len(v), (1.0 - level) / 2.0, 0, 0.0
    while k < n:
        nxt = cum + comb(n, k) * 0.5 ** n
        if nxt > tail:
            break
        cum, k = nxt, k + 1
    if k == 0:
        return None
    return v[k - 1], v[n - k]


def inside_spread(ratios) -> bool:
    """True when 1 lies within [min, max] of the ratios: the rounds disagree
    on which setup is faster (or one round found no difference)."""
    return min(ratios) <= 1.0 <= max(ratios)


def verdict(ratios, min_rounds: int = MIN_ROUNDS) -> str:
    """B_FASTER when every ratio B/A < 1, A_FASTER when every one > 1,
    INSIDE otherwise (1 lies inside the rounds' range of ratios); TOO_FEW
    (formatted) under `min_rounds` ratios: fewer paired rounds resolve nothing."""
    ratios = list(ratios)
    if len(ratios) < min_rounds:
        return TOO_FEW.format(min_rounds)
    if max(ratios) < 1.0:
        return B_FASTER
    if min(ratios) > 1.0:
        return A_FASTER
    return INSIDE


def compare_rounds(a, b, min_rounds: int = MIN_ROUNDS) -> dict:
    """Two setups timed in the same rounds: `a[i]`, `b[i]` are round i's values
    (e.g. median step times); a round where either is None (failed) is left out.
    Returns rounds (paired), ratios (b / a per round), chance_level (`chance_level`), median_ratio, min_ratio,
    max_ratio, a_median, b_median (over rounds) and verdict."""
    pairs = [(float(x), float(y)) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    ratios = [y / x for x, y in pairs]
    out = {"rounds": len(pairs), "ratios": ratios, "verdict": verdict(ratios, min_rounds),
           "chance_level": chance_level(len(pairs)),
           "median_ratio": None, "min_ratio": None, "max_ratio": None,
           "a_median": None, "b_median": None}
    if pairs:
        out.update(median_ratio=statistics.median(ratios), min_ratio=min(ratios),
                   max_ratio=max(ratios), a_median=statistics.median(x for x, _ in pairs),
                   b_median=statistics.median(y for _, y in pairs))
    return out
