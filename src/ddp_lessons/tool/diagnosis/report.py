"""What `diagnose` returns: plain dataclasses that print as a short report."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from .causes import CAUSES

MEASURED, SUSPECTED = "measured", "suspected"


@dataclass(frozen=True)
class Finding:
    """One cause of lost time.

    `cause`: a key of `CAUSES`; `what`: the outside work it is about ("" otherwise); `seconds`: what
    it cost at the rank where it costs most (`rank`); `share`: of that rank's wall time (the run's
    start to `result()`); `window_share`: of its window (from the first step on, start-up left out);
    `per_rank`: the seconds on each rank; `detail`: the numbers that show it; `change`: what to change,
    written for this run (its world size, cores, buckets, loader); `check`: how to see the change
    worked; `status`: "measured" (the seconds are time the timer saw spent on it) or "suspected"
    (inferred, not seen: `python -m ddp_lessons doctor --confirm` measures what the change saves);
    `needs_code`: the change needs the user's code (not a setting a run can be given); `knob`: the
    setting that tests it where one does, as the doctor applies it ({"ddp": {...}}, {"loader": {...}},
    {"threads": n}, {"hook": "bf16"}); `saves`: where the change removes only part of the seconds, the share
    of the window it would save (a model: evaluation done N times over, sharded, saves 1 - 1/N of it)."""
    cause: str
    what: str
    seconds: float
    share: float
    per_rank: list
    detail: str
    change: str
    check: str
    status: str = MEASURED
    window_share: float = 0.0
    rank: int = 0
    needs_code: bool = False
    knob: dict | None = None
    saves: float | None = None

    @property
    def label(self) -> str:
        return CAUSES[self.cause][0] + (f": {self.what}" if self.what else "")


@dataclass(frozen=True)
class Diagnosis:
    """Findings ranked by the time they cost in the loop (most first; start-up apart, in `startup`),
    `confirmations` (what was checked and is as it should be), `notes` (the shared-cores note, a
    projection, the clock), `undecided` (what the numbers cannot decide, and what would), and per rank
    (`ranks`): wall, steps, outside work and unattributed seconds; `scores`: per phase, each rank's
    median against the fastest rank's (1.0 fastest). Findings under 3% of a rank's window are not listed."""
    findings: list
    undecided: list
    ranks: list
    world_size: int
    setup: str = ""
    notes: list = field(default_factory=list)
    scores: dict = field(default_factory=dict)
    startup: Finding | None = None
    confirmations: list = field(default_factory=list)

    @property
    def causes(self) -> list[str]:
        """The findings' causes, most costly first (start-up is not one: see `startup`)."""
        return [f.cause for f in self.findings]

    def finding(self, cause: str) -> Finding | None:
        return next((f for f in self.findings if f.cause == cause), None)

    def __str__(self) -> str:
        walls = [r["wall"] for r in self.ranks]
        lines = [f"diagnosis of {len(self.ranks)} of {self.world_size} rank(s){self.setup}; "
                 f"wall {min(walls):.3g} .. {max(walls):.3g} s per rank"]
        if not self.findings:
            lines.append("  no cause in the loop costs 3% of a rank's window or more")
        for i, f in enumerate(self.findings, 1):
            lines.append(f" {i}. {f.label} [{f.status}]: {f.seconds:.3g} s, {f.window_share:.0%} of the window "
                         f"({f.share:.0%} of the wall)")
            lines.append(f"      {f.detail}")
            lines.append(f"      change{' (in your code)' if f.needs_code else ''}: {f.change}")
            lines.append(f"      check: {f.check}")
        if self.startup is not None:
            s = self.startup
            lines.append(f" start-up, once per launch: {s.seconds:.3g} s ({s.share:.0%} of the wall): {s.detail}")
        uneven = {k: v for k, v in self.scores.items() if min(v) < 0.95}  # ranks within 5% are not listed
        if uneven:
            lines.append(" relative speed per phase, rank by rank (fastest = 1.00): " + "; ".join(
                f"{k} " + ", ".join(f"{x:.2f}" for x in v) for k, v in uneven.items()))
        lines += [f" ok: {c}" for c in self.confirmations]
        lines += [f" note: {n}" for n in self.notes]
        lines += [f" undecided: {u}" for u in self.undecided]
        return "\n".join(lines)

    def table(self) -> list[tuple]:
        """(rank, cause, seconds, share of the wall, status) rows, most costly first."""
        return [(i, f.label, f.seconds, f.share, f.status) for i, f in enumerate(self.findings, 1)]

    def _repr_pretty_(self, p, cycle):  # IPython prints the text report
        p.text(str(self))

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{i}</td><td>{html.escape(f.label)}</td><td>{f.status}</td><td>{f.seconds:.3g}</td>"
                       f"<td>{f.window_share:.0%}</td><td>{html.escape(f.detail)}</td>"
                       f"<td>{html.escape(f.change)}</td></tr>" for i, f in enumerate(self.findings, 1))
        extra = [("start-up", [f"{self.startup.seconds:.3g} s: {self.startup.detail}"] if self.startup else []),
                 ("ok", self.confirmations), ("notes", self.notes), ("undecided", self.undecided)]
        lists = "".join(f"<p>{name}:</p><ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in xs) + "</ul>"
                        for name, xs in extra if xs)
        return ("<table><tr><th>#</th><th>cause</th><th>status</th><th>s</th><th>of window</th><th>numbers</th>"
                f"<th>change</th></tr>{rows}</table>" + lists)
