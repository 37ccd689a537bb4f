"""Self-checks for the exercises that close every notebook.

A notebook asks a question; the learner computes an answer and calls
`check("00.1", answer)`. The reply is `right`, `close` or `wrong`, with why.
This module holds the registry and the comparisons; each part of the course
registers its own exercises in its `exercises` module (`intro`, `case1`,
`case2`, `own`), which also hands the notebook `check`. The expected answers are
computed there, never printed in the notebook.
Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import math
from typing import Callable

_EXERCISES: dict[str, Callable] = {}


def exercise(name: str):
    """Decorator: register `fn(answer) -> (verdict, why)` as exercise `name`."""
    def add(fn):
        _EXERCISES[name] = fn
        return fn
    return add


def check(name: str, answer) -> None:
    """Check `answer` to exercise `name`; prints the verdict (right, close or wrong: why).
    Defined in notebook 00_first_launch."""
    if name not in _EXERCISES:
        raise KeyError(f"no exercise {name!r} is loaded (loaded: {sorted(_EXERCISES)}): import `check` "
                       "from the notebook's own module, e.g. `from ddp_lessons.cases.case1.exercises import check`")
    if answer is None or answer is ...:
        line = "not answered yet: replace the ... with your answer"
    else:
        verdict, why = _EXERCISES[name](answer)
        line = f"{verdict}: {why}" if why else verdict
    print(line)


def compare_number(answer, expected: float, rel_right: float = 0.02, rel_close: float = 0.2,
                   what: str = "the value") -> tuple[str, str]:
    """right within rel_right, close within rel_close, else wrong (says which way)."""
    try:
        a = float(answer)
    except (TypeError, ValueError):
        return "wrong", f"expected a number for {what}, got {answer!r}"
    if not math.isfinite(a):
        return "wrong", f"{what} must be finite"
    rel = abs(a - expected) / max(abs(expected), 1e-300)
    if rel <= rel_right:
        return "right", ""
    way = "too large" if a > expected else "too small"
    if rel <= rel_close:
        return "close", f"{what} is {rel:.0%} {way}: check your rounding or units"
    factor = max(a, expected) / max(min(a, expected), 1e-300)
    return "wrong", f"{what} is {way} by a factor {factor:.3g}: check the formula"


def compare_choice(answer, expected, explain: dict | None = None) -> tuple[str, str]:
    """right if equal (strings compared case-insensitively), else wrong with a hint."""
    norm = (lambda x: x.strip().lower()) if isinstance(expected, str) else (lambda x: x)
    try:
        ok = norm(answer) == norm(expected)
    except AttributeError:
        ok = False
    if ok:
        return "right", ""
    hint = (explain or {}).get(norm(answer) if isinstance(answer, str) else answer, "")
    return "wrong", hint or "not that one: re-read the measurement above"

