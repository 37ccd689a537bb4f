"""The course's three figures, from the timings `StepTimer` returns.

- `step_breakdown`: per rank, each step stacked as data wait, forward,
  backward compute, exposed all-reduce and optimizer, with the all-reduce's
  whole busy time drawn over it (the part above the exposed bar was hidden
  behind the backward pass);
- `timeline`: one step, one row per rank: backward compute and every
  bucket's all-reduce on a time axis, so overlap is visible;
- `bandwidth`: all-reduce time and busbw over message size, with the fitted
  latency + bytes/bandwidth model.
Every function returns the matplotlib Figure, already closed: a notebook shows
it once, as the cell's value, and pyplot keeps no reference to it.
Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from .allreduce import predict_time

PARTS = [("data", "data wait", "#bbbbbb"), ("forward", "forward", "#4c72b0"),
         ("backward_compute", "backward compute", "#55a868"),
         ("exposed", "exposed all-reduce", "#c44e52"), ("optimizer", "optimizer", "#8172b2")]


def step_breakdown(rank_times: list[dict], title: str = "", skip: int = 0, unit: float = 1e3):
    """Stacked per-step time of every rank (ms); the black line is all-reduce busy time."""
    n = len(rank_times)
    fig, axes = plt.subplots(1, n, figsize=(4.5 * n, 3.2), sharey=True, squeeze=False)
    for ax, times in zip(axes[0], rank_times):
        steps = times["steps"][skip:]
        xs = [s["step"] for s in steps]
        bottom = [0.0] * len(steps)
        for key, label, color in PARTS:
            vals = [s.get(key, 0.0) * unit for s in steps]
            ax.bar(xs, vals, bottom=bottom, color=color, label=label, width=0.85)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.plot(xs, [s["allreduce"] * unit for s in steps], "k.-", lw=1, label="all-reduce busy")
        ax.set_title(f"rank {times['rank']}" + (f" ({times['device']})" if times.get("device") else ""))
        ax.set_xlabel("step")
    axes[0][0].set_ylabel("time per step (ms)")
    axes[0][-1].legend(fontsize=7, loc="upper right")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    plt.close(fig)
    return fig


def timeline(rank_times: list[dict], step: int = -1, title: str = "", unit: float = 1e3):
    """One step on a time axis (ms): phases on the upper lane, buckets below."""
    n = len(rank_times)
    fig, ax = plt.subplots(figsize=(9, 0.9 + 0.9 * n))
    colors = {"forward": "#4c72b0", "backward": "#55a868", "optimizer": "#8172b2"}
    for row, times in enumerate(rank_times):
        s = times["steps"][step]
        y = (n - 1 - row) * 2
        for name, (a, b) in s["phases"].items():
            ax.barh(y + 0.5, (b - a) * unit, left=a * unit, height=0.8,
                    color=colors.get(name, "#999999"), label=name if row == 0 else None)
        for k, bk in enumerate(s["buckets"]):
            ax.barh(y - 0.5, (bk["end"] - bk["start"]) * unit, left=bk["start"] * unit, height=0.8,
                    color="#c44e52" if k % 2 == 0 else "#dd8452", edgecolor="k", lw=0.3,
                    label="bucket all-reduce" if row == 0 and k == 0 else None)
    ax.set_yticks([(n - 1 - r) * 2 + d for r in range(n) for d in (0.5, -0.5)])
    ax.set_yticklabels([f"rank {r} {lane}" for r in range(n) for lane in ("compute", "all-reduce")], fontsize=8)
    ax.set_xlabel("time since step start (ms)")
    ax.legend(fontsize=7, loc="lower right", ncol=4)
    ax.set_title(title or f"one step (step {rank_times[0]['steps'][step]['step']})")
    fig.tight_layout()
    plt.close(fig)
    return fig


def bandwidth(series: list[tuple], title: str = "all-reduce over message size"):
    """`series`: (label, rows from bench.summarize, fit or None). Time and busbw panels."""
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
