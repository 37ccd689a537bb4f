"""What a what-if prints: the numbers, then every assumption behind them; and
a table over links and rank counts.
(The README, "What-if", introduces it; notebook 03 uses it for case 1's gap, `cases.case1.gap`.)"""

from __future__ import annotations


def _ms(x: float) -> str:
    return f"{x * 1e3:,.1f} ms"


def _span(p, what: str) -> str:
    lo, hi = p.spread(what)
    return f"{_ms(p.median(what))} (steps: {_ms(lo)} .. {_ms(hi)})"


def describe(p) -> str:
    """A Prediction in words (a model's output, labelled so)."""
    lines = [f"note: {n}" for n in p.notes] + [
        f"what-if (a model, not a measurement): {p.source} on {p.world_size} ranks over {p.link.name}, "
        f"{len(p.steps)} steps after warm-up",
        f"  all-reduce busy per step  {_span(p, 'busy')}",
        f"  exposed per step          {_span(p, 'exposed')}",
        f"  step                      {_span(p, 'predicted')}, recorded on 1 run: {_ms(p.median('recorded'))}",
        f"  scaling efficiency        {p.median('efficiency'):.2f} (recorded step / predicted step, per rank)",
        f"  epoch                     {p.epoch_predicted:,.1f} s on {p.world_size} ranks against "
        f"{p.epoch_recorded:,.1f} s as recorded on {p.recorded_world} ({p.steps_per_epoch:,.0f} steps split "
        f"{p.world_size} ways)",
    ]
    if p.run_predicted is not None:
        length = f"{p.epochs:g} epochs" if p.epochs is not None else f"{p.iterations} steps"
        lines.append(f"  {length:<25} {p.run_predicted:,.1f} s on {p.world_size} ranks (start-up not included)")
    lines.append("assumed:")
    return "\n".join(lines + [f"  - {a}" for a in p.assumptions()])


def table_text(rows: list) -> str:
    """The rows of `whatif_table` as aligned text, readable at any magnitude."""
    head = f"{'link':<20} {'N':>3} {'exposed':>12} {'step':>12} {'efficiency':>10} {'epoch':>10}"
    out = [head]
    for r in rows:
        out.append(f"{r['link']:<20} {r['world_size']:>3} {_ms(r['exposed']):>12} {_ms(r['step']):>12} "
                   f"{r['efficiency']:>10.2f} {r['epoch']:>8,.1f} s")
    return "\n".join(out)
