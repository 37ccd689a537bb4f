"""The accepted answer's fixes as an ablation: each alone, then cumulatively.

Every variant is the posted setup (`Options.broken()`) with some of the
answer's changes switched on, so two rows of the table differ by exactly the
options named. `find_unused_parameters=False` always comes with the heads
dropped: alone it crashes (notebook 02 shows the error); the heads dropped alone is a row of its own.
Defined in notebook 02_case1_answer.
"""

from __future__ import annotations

from .options import Options
from .readout import per_rank

# The answer's claims, in its order, as option changes.
FIXES = {
    "1 init before sampler": dict(setup="answer"),
    "2 batch kept, LR x world": dict(batch="scale_lr"),
    "3 log on rank 0": dict(log_ranks="rank0"),
    "4a find_unused=False (+ heads dropped)": dict(find_unused_parameters=False, drop_heads=True),
    "4b num_workers=8": dict(num_workers=8),
    "4c loss.item()": dict(loss_accum="item"),
}
# Half of 4a: the heads dropped, find_unused_parameters still True (an "alone" row only).
HEADS_ONLY = "4a heads dropped only (find_unused=True)"


def variants(steps_limit: int = 6, **common) -> dict[str, Options]:
    """Name -> options: the posted setup, each fix alone, then the fixes added one by one.
    Defined in notebook 02_case1_answer."""
    base = dict(steps_limit=steps_limit, evaluation="none", **common)
    out = {"posted": Options.broken(**base)}
    for name, change in FIXES.items():
        if name.startswith("4a"):  # 4a changes two options: the heads dropped alone first, then both
            out[f"alone: {HEADS_ONLY}"] = Options.broken(**base, drop_heads=True)
        out[f"alone: {name}"] = Options.broken(**base, **change)
    acc = {}
    for i, (name, change) in enumerate(FIXES.items()):
        acc.update(change)
        if i > 0:  # the first cumulative variant is the first 'alone' one
            out[f"up to: {name}"] = Options.broken(**base, **acc)
    return out


def table(runs: dict, skip: int = 2) -> list[dict]:
    """One row per variant (rank 0, medians over steps after `skip`): what changed.

    Counts (steps, samples, bytes) are exact; times are in seconds. Defined in notebook 02_case1_answer."""
    rows = []
    base = per_rank(runs["posted"], skip)[0]
    for name, res in runs.items():
        r = per_rank(res, skip)[0]
        rows.append({"variant": name, "samples": r["samples"], "steps": r["steps"],
                     "allreduce_bytes": r["allreduce_bytes"][0], "peak_lr": res[0]["lr_peak"],
                     "step_time": r["step_time"], "data": r["data"], "exposed": r["exposed"],
                     "vs_posted": r["step_time"] / base["step_time"]})
    return rows


def bytes_changed(rows: list[dict]) -> list[str]:
    """The variants (`table` rows) that all-reduce other bytes per step than the first (the posted
    setup). Defined in notebook 02_case1_answer."""
    return [r["variant"] for r in rows if r["allreduce_bytes"] != rows[0]["allreduce_bytes"]]


def plot(rows, title: str = "the answer's fixes, alone and cumulatively (median step, rank 0)"):
    """Horizontal bars of the median step time per variant, posted setup first.
    Defined in notebook 02_case1_answer."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 0.32 * len(rows) + 1))
    names = [r["variant"] for r in rows][::-1]
    vals = [r["step_time"] * 1e3 for r in rows][::-1]
    colors = ["#4c72b0" if n.startswith("alone") else "#55a868" if n.startswith("up to") else "#999999" for n in names]
    ax.barh(names, vals, color=colors)
    ax.axvline(rows[0]["step_time"] * 1e3, color="k", lw=0.8, ls="--")
    ax.set_xlabel("median step time (ms)")
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    plt.close(fig)
    return fig
