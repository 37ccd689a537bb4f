"""What `diagnose` returns: plain dataclasses that print as a short table."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from .causes import CAUSES


@dataclass(frozen=True)
class Finding:
    """One cause of lost time. `cause` is a key of `CAUSES`; `what` names the
    outside work it is about ("" otherwise); `seconds` and `share` (of that
    rank's wall time) are at the rank where it costs most; `per_rank` the
    seconds on each rank; `detail` the numbers that show it."""
    cause: str
    what: str
    seconds: float
    share: float
    per_rank: list
    detail: str
    change: str
    check: str

    @property
    def label(self) -> str:
        return CAUSES[self.cause][0] + (f": {self.what}" if self.what else "")


@dataclass(frozen=True)
class Diagnosis:
    """Findings ranked by the time they cost (most first), what could not be
    decided, and per rank: wall time (the run's start to result()), steps,
    outside work (total, and by name in `outside_work`) and unattributed seconds; `notes` (a
    projection, shared cores) and `scores` (per phase, each rank against the fastest: 1.0 fastest)."""
    findings: list
    undecided: list
    ranks: list
    world_size: int
    setup: str = ""
    notes: list = field(default_factory=list)
    scores: dict = field(default_factory=dict)

    @property
    def causes(self) -> list[str]:
        """The findings' causes, most costly first."""
        return [f.cause for f in self.findings]

    def __str__(self) -> str:
        walls = [r["wall"] for r in self.ranks]
        lines = [f"diagnosis of {len(self.ranks)} of {self.world_size} rank(s){self.setup}; "
                 f"wall {min(walls):.3g} .. {max(walls):.3g} s per rank"]
        if not self.findings:
            lines.append("  no cause costs 3% of a rank's wall time or more")
        for i, f in enumerate(self.findings, 1):
            lines.append(f" {i}. {f.label}: {f.seconds:.3g} s, {f.share:.0%} of the wall")
            lines.append(f"      {f.detail}")
            lines.append(f"      change: {f.change}")
            lines.append(f"      check: {f.check}")
        uneven = {k: v for k, v in self.scores.items() if min(v) < 0.95}  # ranks within 5% are not listed
        if uneven:
            lines.append(" relative speed per phase, rank by rank (fastest = 1.00): " + "; ".join(
                f"{k} " + ", ".join(f"{x:.2f}" for x in v) for k, v in uneven.items()))
        lines += [f" note: {n}" for n in self.notes]
        lines += [f" undecided: {u}" for u in self.undecided]
        return "\n".join(lines)

    def table(self) -> list[tuple]:
        """(rank, cause, seconds, share) rows, most costly first."""
        return [(i, f.label, f.seconds, f.share) for i, f in enumerate(self.findings, 1)]

    def _repr_pretty_(self, p, cycle):  # IPython prints the text table
        p.text(str(self))

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{i}</td><td>{html.escape(f.label)}</td><td>{f.seconds:.3g}</td>"
                       f"<td>{f.share:.0%}</td><td>{html.escape(f.detail)}</td>"
                       f"<td>{html.escape(f.change)}</td></tr>" for i, f in enumerate(self.findings, 1))
        und = "".join(f"<li>{html.escape(u)}</li>" for u in self.undecided)
        return ("<table><tr><th>#</th><th>cause</th><th>s</th><th>share</th><th>numbers</th>"
                f"<th>change</th></tr>{rows}</table>" + (f"<p>undecided:</p><ul>{und}</ul>" if und else ""))
