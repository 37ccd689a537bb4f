"""The course's figures, from the timings `StepTimer` returns: `step_breakdown` (each rank's
steps stacked by part), `comparison` (runs side by side, from `ddp_lessons.compare`), `timeline`
(one step, one row per rank, so overlap is visible), `bandwidth` (all-reduce time and busbw over
message size, with the fitted model), `findings` (a diagnosis's costs) and `rounds` (setups' times
per round). Legends sit outside the data. Every function returns the matplotlib Figure, closed: a
notebook shows it once, as the cell's value, and pyplot keeps no reference to it.
Defined in notebook 00_first_launch.
"""

from __future__ import annotations

try:
    import matplotlib.pyplot as plt
except ImportError:  # the tool's light install: everything but its figures
    raise ImportError("ddp_lessons' figures need matplotlib: pip install 'ddp-lessons[plots]'") from None

from .allreduce import predict_time
from .runs import Rank

PARTS = [("data", "data wait", "#bbbbbb"), ("forward", "forward", "#4c72b0"),
         ("backward_compute", "backward compute", "#55a868"),
         ("wait", "waiting for a slower rank", "#ffbf00"),
         ("exposed_comm", "exposed all-reduce", "#c44e52"), ("optimizer", "optimizer", "#8172b2")]
_KNOWN = {"forward", "backward", "optimizer"}
_OTHER_COLORS = ["#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd"]


def _step_parts(s, others: list) -> dict:
    """One step's (a `Step`) stacked parts (seconds): the fixed ones, other phases, the remainder."""
    parts = {k: getattr(s, k) or 0.0 for k, _, _ in PARTS if k != "exposed_comm"}
    parts.update(exposed_comm=max(0.0, (s.exposed or 0.0) - (s.wait or 0.0)))
    parts.update({k: s.seconds(k) or 0.0 for k in others})
    return {**parts, "remainder": max(0.0, s.step_time - sum(parts.values()))}


def _ranks(ranks) -> list:
    """Each rank as a `Rank`: `ranks` is a `Run`, or a list of what the workers returned (or of Ranks)."""
    return [r if isinstance(r, Rank) else Rank(r) for r in ranks]


def _legend_outside(ax, **kw):
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kw)


def step_breakdown(ranks: list, title: str = "", skip: int = 0, unit: float = 1e3, labels=None,
                   clip: float = 4.0):
    """Stacked per-step time of every rank (ms): data wait, forward, backward compute, waiting for
    a slower rank, exposed all-reduce, optimizer, any other phase, and the step's remainder no phase
    covers; the grey line is the step time, the black one the all-reduce's whole busy time (the part
    above the exposed bar was hidden behind the backward pass). `ranks`: a `Run`, or what the workers
    returned (or their timer results); `labels`: a title per panel (default "rank r (device)"). The y axis stops at
    `clip` times the median step, so one slow step (a loader starting, an evaluation) does not flatten
    the rest: a clipped step is marked with its time. Defined in notebook 00_first_launch."""
    rank_list = _ranks(ranks)
    n = len(rank_list)
    fig, axes = plt.subplots(1, n, figsize=(4.5 * n + 1.6, 3.2), sharey=True, squeeze=False)
    tops = sorted(s.step_time * unit for r in rank_list for s in r.steps(skip)) or [1.0]
    ymax = clip * tops[len(tops) // 2] if tops[-1] > clip * tops[len(tops) // 2] else None
    for i, (ax, rank) in enumerate(zip(axes[0], rank_list, strict=True)):
        steps = rank.steps(skip)
        others = list(dict.fromkeys(k for s in steps for k in s.phases if k not in _KNOWN))
        rows = [_step_parts(s, others) for s in steps]
        xs = [s.step for s in steps]
        bottom = [0.0] * len(steps)
        styles = PARTS + [(k, k, _OTHER_COLORS[i % len(_OTHER_COLORS)]) for i, k in enumerate(others)]
        for key, label, color in styles + [("remainder", "no phase (remainder)", "#eeeeee")]:
            vals = [r[key] * unit for r in rows]
            ax.bar(xs, vals, bottom=bottom, color=color, label=label, width=0.85, edgecolor="none")
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.plot(xs, [s.step_time * unit for s in steps], "_", color="#555555", ms=8, label="step time")
        timed = [(x, s.allreduce * unit) for x, s in zip(xs, steps, strict=True) if s.allreduce is not None]
        if timed:  # only steps whose all-reduce was measured (DDP's timings may be sampled)
            ax.plot([x for x, _ in timed], [y for _, y in timed], "k.-" if len(timed) == len(steps) else "k.", lw=1,
                    label="all-reduce busy")
        if ymax is not None:
            for x, s in zip(xs, steps, strict=True):
                if s.step_time * unit > ymax:
                    ax.annotate(f"{s.step_time * unit:.0f}", (x, ymax), fontsize=6, ha="center", va="top",
                                xytext=(0, -2), textcoords="offset points")
        default = f"rank {rank.rank} ({rank.device})"
        ax.set_title(labels[i] if labels else default, fontsize=9)
        ax.set_xlabel("step")
    if ymax is not None:
        axes[0][0].set_ylim(0, ymax)
    axes[0][0].set_ylabel("time per step (ms)")
    if ymax is not None:
        fig.text(0.01, 0.01, f"axis cut at {clip:g}x the median step; a number marks a longer step (ms)", fontsize=7)
    _legend_outside(axes[0][-1])
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    plt.close(fig)
    return fig


def timeline(ranks: list, step: int = -1, title: str = "", unit: float = 1e3):
    """One step on a time axis (ms), one row per rank (`ranks` as for `step_breakdown`): phases
    (backward compute among them) on the upper lane, every bucket's all-reduce below, so overlap is
    visible. Defined in notebook 00_first_launch."""
    rank_list = _ranks(ranks)
    n = len(rank_list)
    fig, ax = plt.subplots(figsize=(9, 1.5 + 0.9 * n))
    colors = {"forward": "#4c72b0", "backward": "#55a868", "optimizer": "#8172b2"}
    for row, rank in enumerate(rank_list):
        s = rank.steps()[step]
        y = (n - 1 - row) * 2
        for name, (a, b) in s.phases.items():
            ax.barh(y + 0.5, (b - a) * unit, left=a * unit, height=0.8,
                    color=colors.get(name, "#999999"), label=name if row == 0 else None)
        for k, bk in enumerate(s.buckets):   # one colour; black edges tell the buckets apart
            ax.barh(y - 0.5, (bk.end - bk.start) * unit, left=bk.start * unit, height=0.8,
                    color="#dd8452", edgecolor="k", lw=0.4,
                    label="all-reduce, one bar per bucket" if row == 0 and k == 0 else None)
    ax.set_yticks([(n - 1 - r) * 2 + d for r in range(n) for d in (0.5, -0.5)])
    ax.set_yticklabels([f"rank {r} {lane}" for r in range(n) for lane in ("compute", "all-reduce")], fontsize=8)
    ax.set_xlabel("time since step start (ms)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.35 - 0.1 / n), ncol=4)
    ax.set_title(title or f"one step (step {rank_list[0].steps()[step].step})")
    fig.tight_layout()
    plt.close(fig)
    return fig


def bandwidth(series: list[tuple], title: str = "all-reduce over message size"):
    """`series`: (label, rows from bench.summarize, fit or None). Time and busbw panels over message
    size; a fit is drawn as the latency + bytes/bandwidth model.
    Defined in notebook 00_first_launch."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    for label, rows, fit in series:
        xs = [r["bytes"] for r in rows]
        line, = a1.loglog(xs, [r["time"] * 1e6 for r in rows], "o", ms=3, label=label)
        a2.semilogx(xs, [r["busbw"] / 1e9 for r in rows], "o-", ms=3, color=line.get_color(), label=label)
        if fit:
            a1.loglog(xs, [predict_time(x, fit) * 1e6 for x in xs], "-", lw=1, color=line.get_color(),
                      label=f"fit: {fit['latency'] * 1e6:.0f} us + bytes / {fit['bandwidth'] / 1e9:.2f} GB/s")
    a1.set_xlabel("message size (bytes)")
    a1.set_ylabel("time (us)")
    a2.set_xlabel("message size (bytes)")
    a2.set_ylabel("busbw (GB/s)")
    a1.legend(fontsize=7)
    a2.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    plt.close(fig)
    return fig


def comparison(comparison, title: str = "runs compared"):
    """`comparison` from `ddp_lessons.compare`: throughput (median, min-max of
    repeats) per run, and each run's median step split into its phases (ms)."""
    names = list(comparison.rows)
    rows = [comparison.rows[n] for n in names]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11.5, 3.4))
    tp = [getattr(r, comparison.metric) for r in rows]
    med = [t["median"] if t else 0.0 for t in tp]
    err = [[m - (t["min"] if t else 0.0) for m, t in zip(med, tp, strict=True)],
           [(t["max"] if t else 0.0) - m for m, t in zip(med, tp, strict=True)]]
    a1.bar(names, med, yerr=err, capsize=4, color="#4c72b0")
    a1.set_ylabel("samples/s (median, min-max of repeats)")
    # stacked: the parts of a step; "wait" is inside "exposed", the all-reduce partly hidden
    keys = list(dict.fromkeys(k for r in rows for k in r.phases if k not in ("allreduce", "wait")))
    bottom = [0.0] * len(rows)
    for i, k in enumerate(keys):
        vals = [(r.phases.get(k) or {"median": 0.0})["median"] * 1e3 for r in rows]
        a2.bar(names, vals, bottom=bottom, label=k, color=(PARTS_COLORS.get(k) or _OTHER_COLORS[i % 5]))
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    a2.plot(names, [r.step["median"] * 1e3 for r in rows], "k_", ms=20, label="step time")
    a2.set_ylabel("median step (ms)")
    _legend_outside(a2)
    fig.suptitle(title)
    fig.tight_layout()
    plt.close(fig)
    return fig


PARTS_COLORS = {k: c for k, _, c in PARTS} | {"exposed": "#c44e52"}


def findings(diagnosis, title: str = ""):
    """A `Diagnosis` as bars: each finding's seconds (at the rank where it costs most), its share of
    that rank's wall time written beside it, most costly on top. Defined in notebook 07_diagnose_your_own_run."""
    fs = list(diagnosis.findings)[::-1]
    # one size whatever the number of findings: a notebook's stored figure then reads the same on every run
    fig, ax = plt.subplots(figsize=(7.5, 2.6))
    ax.barh([f.label[:48] for f in fs], [f.seconds for f in fs], color="#4c72b0")
    for i, f in enumerate(fs):
        ax.annotate(f"{f.share:.0%} of the wall", (f.seconds, i), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=7)
    ax.set_xlabel("seconds lost (at the rank where it costs most)")
    ax.set_xlim(0, max([f.seconds for f in fs], default=1.0) * 1.35)
    ax.tick_params(axis="y", labelsize=8)
    ax.set_title(title or f"diagnose: {diagnosis.world_size} rank(s){diagnosis.setup}", fontsize=9)
    fig.tight_layout()
    plt.close(fig)
    return fig


def rounds(times: dict, title: str = "", ylabel: str = "run time (s)"):
    """Setups' times, one dot per round and a line at each setup's median: `times` is name -> list of
    round values (None: a failed round). Defined in notebook 06_case2_breakeven."""
    import statistics
    names = list(times)
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(names), 3.0))
    for i, n in enumerate(names):
        vals = [v for v in times[n] if v is not None]
        ax.plot([i] * len(vals), vals, "o", ms=4, alpha=0.7, color="#4c72b0")
        if vals:
            ax.plot([i - 0.25, i + 0.25], [statistics.median(vals)] * 2, "k-", lw=2)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel(f"{ylabel}; line: median", fontsize=8)
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    plt.close(fig)
    return fig
