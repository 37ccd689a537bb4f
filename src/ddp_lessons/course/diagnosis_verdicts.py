"""Verdicts on a `Diagnosis`: a lesson checks what `diagnose` says against what
the lesson measured itself. Each takes `Diagnosis.causes` (most costly first)
and comes out either way (tests/course/test_diagnose_claims.py).
Used in notebooks 05 and 07.
"""

from __future__ import annotations

from ..tool import verdict as V


def _findings(causes: list) -> dict:
    return {"findings, most costly first": ", ".join(causes) or "none"}


def ranks_first(causes: list, cause: str, label: str) -> V.Verdict:
    """`diagnose` ranks `cause` first: the tool's order against the lesson's measured one.
    Defined in notebook 05_case2_where_time_goes."""
    v = V.exact(f"diagnose ranks {label} first", causes[0] if causes else "no finding", expected=cause,
                what="first finding", numbers=_findings(causes))
    first = causes[0] if causes else "nothing"
    return V.worded(v, holds=f"diagnose puts {label} first, as the lesson's own measurement did.",
                    fails=f"diagnose puts {first} first here, not {label}: read its first finding before the lesson's.",
                    figure=f"first finding: {first}")


def names(causes: list, expected: list, label: str) -> V.Verdict:
    """`diagnose` names every cause in `expected` among its findings (tests/course/test_diagnose_claims.py)."""
    missing = [c for c in expected if c not in causes]
    v = V.exact(f"diagnose names {label}", len(expected) - len(missing), expected=len(expected),
                what="the lesson's causes it names",
                numbers=_findings(causes) | {"missing": ", ".join(missing) or "none"})
    return V.worded(v, holds=f"diagnose names {label}, the causes the lesson measured.",
                    fails=f"diagnose misses some of {label} on this run: {', '.join(missing)}.",
                    figure=f"named {len(expected) - len(missing)} of {len(expected)}")

