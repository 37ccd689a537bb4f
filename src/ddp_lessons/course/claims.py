"""A lesson's claims declared as data: each once, in a table per notebook (a case's `claims` module),
with its sentence for each outcome, its rule, side, limit, and the figure printed beside it;
`decide` is the one skeleton that turns measured numbers into a `Verdict`.

A claim is for an outcome that could go either way on a reader's machine; its test makes it fail on a
plausible counter-example. A fact that cannot come out otherwise is printed as a reading, not a claim.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..tool import verdict as V
from ..tool.spread import MIN_ROUNDS

RULES = ("repeats", "paired", "separated", "interval", "exact")


@dataclass(frozen=True)
class Claim:
    """`rule`: "repeats" (every value of repeated runs on `side` of `limit`), "paired" (per-round ratios
    b / a of two setups timed in the same rounds below 1 when `faster` is "b"), "separated" (the
    quartiles of two setups' repeats), "interval" (a measured interval [low, high] against `limit`),
    "exact" (a deterministic value against `limit` or `expected`). `holds`, `fails`, `unresolved`: the
    plain sentence printed for each outcome; `figure`: the one deciding figure, a format string of the
    decided numbers (lo, hi, median, n, value)."""
    key: str
    claim: str
    rule: str
    holds: str
    fails: str
    unresolved: str = ""
    side: str = ">"
    limit: float = 1.0
    what: str = "value"
    faster: str = "b"
    names: tuple = ("A", "B")
    expected: object = None
    figure: str = ""
    min_rounds: int = MIN_ROUNDS

    def __post_init__(self):
        if self.rule not in RULES:
            raise ValueError(f"claim {self.key!r}: rule {self.rule!r} is not one of {RULES}")

    def decide(self, *values, numbers: dict | None = None) -> V.Verdict:
        """The verdict on `values` (as the rule takes them: repeats; a, b; low, high; value)."""
        if self.rule == "repeats":
            v = V.repeats(self.claim, values[0], side=self.side, limit=self.limit, what=self.what,
                          min_repeats=self.min_rounds, numbers=numbers)
            xs = [float(x) for x in values[0] if x is not None]
        elif self.rule in ("paired", "separated"):
            fn = V.paired if self.rule == "paired" else V.separated
            kw = {"min_rounds": self.min_rounds} if self.rule == "paired" else {"min_repeats": self.min_rounds}
            v = fn(self.claim, values[0], values[1], faster=self.faster, names=self.names, numbers=numbers, **kw)
            xs = [y / x for x, y in zip(values[0], values[1], strict=True) if x and y is not None]
        elif self.rule == "interval":
            v = V.interval(self.claim, values[0], values[1], side=self.side, limit=self.limit, what=self.what,
                           numbers=numbers)
            xs = [values[0], values[1]]
        else:
            kw = {"expected": self.expected} if self.expected is not None else {"side": self.side, "limit": self.limit}
            v = V.exact(self.claim, values[0], what=self.what, numbers=numbers, **kw)
            xs = [values[0]] if isinstance(values[0], (int, float)) else []
        return V.worded(v, holds=self.holds, fails=self.fails, unresolved=self.unresolved or None,
                        figure=self._figure(xs, values))

    def _figure(self, xs, values) -> str:
        if not self.figure:
            return ""
        nums = {"lo": min(xs) if xs else float("nan"), "hi": max(xs) if xs else float("nan"),
                "n": len(xs), "value": values[0]}
        nums["median"] = sorted(xs)[len(xs) // 2] if xs else float("nan")
        return self.figure.format(**nums)


class Claims(dict):
    """A notebook's claims by key, in notebook order: `CLAIMS.decide(key, *values)` (`Claim.decide`)."""

    def __init__(self, *claims: Claim):
        super().__init__((c.key, c) for c in claims)
        if len(self) != len(claims):
            raise ValueError("two claims share a key")

    def decide(self, key: str, *values, numbers: dict | None = None) -> V.Verdict:
        if key not in self:
            raise KeyError(f"no claim {key!r}: this table holds {', '.join(self)}")
        return self[key].decide(*values, numbers=numbers)
