"""`compare(runs, baseline=...)`: two or more runs side by side, each with the
spread of its repeats, and verdicts that say when a difference is inside it.

A run is given as its repeats: a list of what `launch`/`run` returned, one entry per repeat (or one
such value: one repeat; `diagnosis.inputs`). `_repeat` makes one repeat's numbers (step time, phases,
throughput), `Comparison` holds the rows and prints them, and `_verdict` decides each run's throughput
against the baseline's. Fewer than `spread.MIN_ROUNDS` repeats resolve nothing.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from .. import spread, verdict
from ..timing.reading import median_step
from .inputs import repeats as as_repeats

PHASE_KEYS = ("data", "forward", "backward_compute", "exposed", "wait", "optimizer", "allreduce")


def _repeat(ranks, skip) -> dict:
    meds = [median_step(r, skip) for r in ranks]
    # the slowest rank's median step time (warm-up steps left out): the slowest rank paces every all-reduce
    step = max(m.get("step_time", 0.0) for m in meds)
    keys = dict.fromkeys(k for m in meds for k in m if k in PHASE_KEYS or k in _custom(ranks))
    phases = {k: statistics.median(m.get(k, 0.0) for m in meds) for k in keys}  # median over ranks of medians
    world = max(int(r.get("world_size") or len(ranks)) for r in ranks)
    batch = ranks[0].get("batch_size")  # per rank, as given to StepTimer; samples_per_s: steps only
    out = {"world_size": world, "batch_size": batch, "step": step, "phases": phases,
           "samples_per_s": world * batch / step if batch and step else None, "samples_per_s_wall": None}
    accs = [r.get("account") for r in ranks]
    # from the first step to result() (the slowest rank's; work outside the steps, such as evaluation, included)
    if batch and all(accs):
        span = max(a["wall"] - a["before_first_step"] for a in accs)
        n = statistics.median(len(r["steps"]) for r in ranks)
        out["samples_per_s_wall"] = world * batch * n / span if span > 0 else None
    return out


def _custom(ranks):
    named = {k for r in ranks for s in r["steps"][:1] for k in s.get("phases", {})}
    return named - {"forward", "backward", "optimizer"}


@dataclass(frozen=True)
class Comparison:
    """`rows[name]`: repeats, world size, batch size, and for `step`,
    `samples_per_s`, `samples_per_s_wall` and each phase a `spread.summary`
    of the repeats; `scaling` against the baseline. `verdicts[name]`: the
    run's throughput against the baseline's (a `Verdict`)."""
    rows: dict
    baseline: str
    verdicts: dict
    metric: str

    def __str__(self) -> str:
        head = ["run", "ranks", "repeats", "step: median (min..max)", "samples/s: median (min..max)", "scaling",
                f"throughput vs {self.baseline}"]
        rows = [head]
        for name, r in self.rows.items():
            st, tp = r["step"], r[self.metric]
            rows.append([name, str(r["world_size"]), str(r["repeats"]),
                         f"{_time(st['median'])} ({_time(st['min'])}..{_time(st['max'])})",
                         f"{_num(tp['median'])} ({_num(tp['min'])}..{_num(tp['max'])})" if tp
                         else "n/a (no batch_size)",
                         _num(r["scaling"], ".2f") if r.get("scaling") is not None else "-",
                         _outcome(self.verdicts.get(name), min(r["repeats"], self.rows[self.baseline]["repeats"]))])
        # every column as wide as its widest cell, two spaces apart: readable at any magnitude
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                           for i, (c, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
        lines.append(f"samples/s: {self.metric}; scaling: median over the baseline {self.baseline!r}; "
                     "throughput: higher or lower across every repeat, else inside the spread (`verdicts[name]` "
                     "holds each decision with its numbers)")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def _outcome(v, repeats: int) -> str:
    """A run's throughput against the baseline's, in a word or three (its verdict holds the numbers)."""
    if v is None:
        return "(baseline)"
    if v.resolved:
        return "higher" if v.holds else "lower"
    return "too few repeats" if repeats < spread.MIN_ROUNDS else "inside the spread"


def _num(x: float, small: str = ".3g") -> str:
    """A number in `small` format below 1,000, digits grouped above (never in exponent form)."""
    return f"{x:,.0f}" if x >= 1000 else f"{x:{small}}"


def _time(s: float) -> str:
    """A duration in the unit that keeps it short: s, ms or us, three significant figures."""
    unit, scale = next((u, k) for u, k in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)) if s >= k or u == "us")
    return f"{_num(s / scale)} {unit}"


def _summ(values):
    v = [x for x in values if x is not None]
    return spread.summary(v) if v else None


def compare(runs, baseline: str | None = None, skip: int = 2, metric: str = "samples_per_s_wall",
            paired: bool = False) -> Comparison:
    """Runs side by side. `runs`: {name: repeats} (or a list: named "run 0", ...);
    `baseline`: the name to scale against (default: the first); `metric`:
    "samples_per_s_wall" (default; falls back to "samples_per_s" when a run
    has no account or batch size) or "samples_per_s". Defined in notebook 07_diagnose_your_own_run."""
    if not isinstance(runs, dict):
        runs = {f"run {i}": r for i, r in enumerate(runs)}
    if len(runs) < 2:
        raise ValueError("compare needs two or more runs: {name: repeats, ...}")
    baseline = baseline if baseline is not None else next(iter(runs))
    if baseline not in runs:
        raise ValueError(f"baseline={baseline!r} is not one of the runs: {list(runs)}")
    reps = {n: [_repeat(ranks, skip) for ranks in as_repeats(r)] for n, r in runs.items()}
    if any(rep[metric] is None for rs in reps.values() for rep in rs):
        metric = "samples_per_s"
    rows = {}
    for n, rs in reps.items():
        rows[n] = {"repeats": len(rs), "world_size": rs[0]["world_size"], "batch_size": rs[0]["batch_size"],
                   "step": _summ(r["step"] for r in rs), "samples_per_s": _summ(r["samples_per_s"] for r in rs),
                   "samples_per_s_wall": _summ(r["samples_per_s_wall"] for r in rs),
                   "phases": {k: _summ(r["phases"].get(k) for r in rs)
                              for k in dict.fromkeys(k for r in rs for k in r["phases"])},
                   "values": [r[metric] for r in rs]}
    if paired and len({len(r["values"]) for r in rows.values()}) > 1:
        raise ValueError("paired=True compares repeats made in the same interleaved rounds, so every run needs "
                         "the same number of repeats: got " + ", ".join(f"{n!r} {len(r['values'])}"
                                                                      for n, r in rows.items())
                         + " (drop the unmatched repeats, or compare unpaired)")
    base = rows[baseline]
    verdicts = {}
    for n, row in rows.items():  # scaling: a run's median throughput over the baseline's
        if row[metric] and base[metric]:
            row["scaling"] = row[metric]["median"] / base[metric]["median"] if n != baseline else 1.0
        if n != baseline:
            verdicts[n] = _verdict(n, row["values"], baseline, base["values"], paired)
    return Comparison(rows, baseline, verdicts, metric)


def _verdict(name, values, base_name, base, paired):
    claim = f"{name} has a higher throughput than {base_name}"
    if paired:  # repeats interleaved, A B B A ..., the same count: the per-round ratios
        # per round, time per sample: lower is faster; B (this run) faster means higher throughput. A
        # round without a throughput stays in place (None), so the rounds stay paired.
        inv = lambda xs: [1 / x if x else None for x in xs]  # noqa: E731
        return verdict.paired(claim, inv(base), inv(values), faster="b", names=(base_name, name))
    v, b = [x for x in values if x], [x for x in base if x]
    if min(len(v), len(b)) < spread.MIN_ROUNDS:
        return verdict.Verdict(claim, verdict.UNRESOLVED, {"repeats": f"{len(v)} and {len(b)}"},
                               f"needs at least {spread.MIN_ROUNDS} repeats of each run to know the spread")
    # the ratio's range: the run's smallest throughput over the baseline's largest to its largest over
    # the baseline's smallest; 1 inside that range is "not resolvable here"
    return verdict.interval(claim, min(v) / max(b), max(v) / min(b), side=">", limit=1.0,
                            what=f"throughput {name}/{base_name} (range over repeats)",
                            numbers={"repeats": f"{len(v)} and {len(b)}"})
