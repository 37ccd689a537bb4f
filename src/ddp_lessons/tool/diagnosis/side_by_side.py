"""`compare(runs, baseline=...)`: two or more runs side by side, each with the
spread of its repeats, and verdicts that say when a difference is inside it.

A run is given as its repeats: a list of `Run`s (or of what `launch`/`run` returned), one per repeat,
or one run (one repeat). `_repeat` makes one repeat's numbers (time per optimizer step, phases,
throughput), `Comparison` holds the rows and prints them with the speed-up and the efficiency against
the baseline, and `_verdict` decides each run's throughput against the baseline's. Fewer than
`spread.MIN_ROUNDS` repeats resolve nothing.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from .. import spread, verdict
from ..runs import Run

PHASE_KEYS = ("data", "forward", "backward_compute", "exposed", "wait", "optimizer", "allreduce")


def as_repeats(run) -> list[Run]:
    """A run given as repeats (a list of runs) or as one run: a list of `Run`s."""
    if isinstance(run, (list, tuple)) and run and isinstance(run[0], (list, tuple, Run)):
        return [r if isinstance(r, Run) else Run(r) for r in run]
    return [run if isinstance(run, Run) else Run(run)]


@dataclass(frozen=True)
class Repeat:
    """One repeat's numbers: time per optimizer step (the slowest rank's median), the median over ranks of
    each phase's median, throughput (per step, and over the window from the first step on)."""
    world_size: int
    batch_size: int | None
    step: float
    phases: dict
    samples_per_s: float | None
    samples_per_s_wall: float | None


def _repeat(run: Run, skip) -> Repeat:
    meds = [r.median_step(skip) for r in run]
    # the slowest rank's median time per optimizer step (its micro-steps together; warm-up left out):
    # the slowest rank paces every all-reduce
    iters = [statistics.median(it) for r in run if (it := r.iterations(skip) or r.iterations(0))]
    step = max(iters) if iters else 0.0
    keys = dict.fromkeys(k for m in meds for k in m if k in PHASE_KEYS or k in _custom(run))
    phases = {k: statistics.median(m.get(k, 0.0) for m in meds) for k in keys}  # median over ranks of medians
    world, batch = run.world_size, run[0].batch_size  # per rank and micro-step, as given to StepTimer
    steps = [len(r.steps()) for r in run]
    per_iter = max(1.0, statistics.median(steps) / max(1, statistics.median(len(r.iterations(0)) for r in run)))
    wall = None
    accs = [r.account for r in run]
    # from the first step to result() (the slowest rank's; work outside the steps, such as evaluation, included)
    if batch and all(accs):
        span = max(a["wall"] - a["before_first_step"] for a in accs)
        wall = world * batch * statistics.median(steps) / span if span > 0 else None
    return Repeat(world, batch, step, phases, world * batch * per_iter / step if batch and step else None, wall)


def _custom(run):
    named = {k for r in run for s in r.steps()[:1] for k in s.phases}
    return named - {"forward", "backward", "optimizer"}


@dataclass(frozen=True)
class Row:
    """One run of a comparison: its `repeats`, `world_size`, `batch_size`; a `spread.summary` of its
    repeats for `step` (time per optimizer step), `samples_per_s`, `samples_per_s_wall` and each phase
    (`phases`); `values`: each repeat's throughput in the comparison's metric; `speedup` (median throughput
    over the baseline's) and `efficiency` (speedup x baseline ranks / ranks), None without a throughput.
    `row["key"]` reads a field by its name."""
    repeats: int
    world_size: int
    batch_size: int | None
    step: dict | None
    samples_per_s: dict | None
    samples_per_s_wall: dict | None
    phases: dict
    values: list
    speedup: float | None = None
    efficiency: float | None = None

    def __getitem__(self, key: str):
        return getattr(self, key)

    def get(self, key: str, default=None):
        return getattr(self, key, default)

    @classmethod
    def of(cls, rs: list[Repeat], metric: str) -> Row:
        phases = {k: _summ(r.phases.get(k) for r in rs) for k in dict.fromkeys(k for r in rs for k in r.phases)}
        return cls(len(rs), rs[0].world_size, rs[0].batch_size, _summ(r.step for r in rs),
                   _summ(r.samples_per_s for r in rs), _summ(r.samples_per_s_wall for r in rs), phases,
                   [getattr(r, metric) for r in rs])


def _range(summary: dict, fmt) -> str:
    """A `spread.summary` as "median (min..max)" in `fmt`."""
    return f"{fmt(summary['median'])} ({fmt(summary['min'])}..{fmt(summary['max'])})"


@dataclass(frozen=True)
class Comparison:
    """`rows[name]`: a `Row` per run (repeats, world size, batch size, and for `step` (time per optimizer
    step), `samples_per_s`, `samples_per_s_wall` and each phase a `spread.summary` of the repeats;
    `speedup` (median throughput over the baseline's) and `efficiency` (the speed-up per rank added:
    speedup x baseline ranks / ranks; with the same setup on 1 rank as the baseline, the scaling
    efficiency)). `verdicts[name]`: the run's throughput against the baseline's (a `Verdict`)."""
    rows: dict
    baseline: str
    verdicts: dict
    metric: str

    def __str__(self) -> str:
        head = ["run", "ranks", "repeats", "per optimizer step: median (min..max)", "samples/s: median (min..max)",
                "speed-up", "efficiency", f"throughput vs {self.baseline}"]
        rows = [head]
        base = self.rows[self.baseline]
        for name, r in self.rows.items():
            tp = getattr(r, self.metric)
            rows.append([name, str(r.world_size), str(r.repeats), _range(r.step, _time),
                         _range(tp, _num) if tp else "n/a (no batch_size)",
                         _num(r.speedup, ".2f") if r.speedup is not None else "-",
                         f"{r.efficiency:.0%}" if r.efficiency is not None else "-",
                         _outcome(self.verdicts.get(name), min(r.repeats, base.repeats))])
        # every column as wide as its widest cell, two spaces apart: readable at any magnitude
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                           for i, (c, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
        lines.append(f"samples/s: {self.metric}; speed-up: median throughput over the baseline {self.baseline!r}'s; "
                     "efficiency: speed-up x baseline ranks / ranks (the scaling efficiency where the baseline is the "
                     "same setup on 1 rank); throughput: higher or lower across every repeat, else inside the spread "
                     "(`verdicts[name]` holds each decision with its numbers)")
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
    if any(getattr(rep, metric) is None for rs in reps.values() for rep in rs):
        metric = "samples_per_s"
    rows = {n: Row.of(rs, metric) for n, rs in reps.items()}
    if paired and len({len(r.values) for r in rows.values()}) > 1:
        raise ValueError("paired=True compares repeats made in the same interleaved rounds, so every run needs "
                         "the same number of repeats: got " + ", ".join(f"{n!r} {len(r.values)}"
                                                                      for n, r in rows.items())
                         + " (drop the unmatched repeats, or compare unpaired)")
    base = rows[baseline]
    verdicts = {}
    for n, row in rows.items():  # speed-up: a run's median throughput over the baseline's
        mine, theirs = getattr(row, metric), getattr(base, metric)
        if mine and theirs:
            speedup = mine["median"] / theirs["median"] if n != baseline else 1.0
            rows[n] = replace(row, speedup=speedup, efficiency=speedup * base.world_size / row.world_size)
        if n != baseline:
            verdicts[n] = _verdict(n, row.values, baseline, base.values, paired)
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
