"""One replayed step as a picture: the recorded compute on one lane, the
buckets on the link below it, the exposed tail marked. (The README,
"What-if", introduces it; notebook 03 uses it for case 1's gap (`cases.case1.gap`).)"""

from __future__ import annotations

try:
    import matplotlib.pyplot as plt
except ImportError:  # the tool's light install: everything but its figures
    raise ImportError("ddp_lessons' figures need matplotlib: pip install 'ddp-lessons[plots]'") from None

COLORS = {"forward": "#4c72b0", "backward": "#55a868", "optimizer": "#8172b2"}


def replayed_step(prediction, which: str = "median"):
    """The step whose predicted time is the median ("median") or the longest ("max")
    of `prediction`; returns the closed Figure (a notebook shows it once)."""
    steps = sorted(prediction.steps, key=lambda s: s.predicted)
    s = steps[len(steps) // 2] if which == "median" else steps[-1]
    fig, ax = plt.subplots(figsize=(9, 2.4))
    for name, (a, b) in s.phases.items():
        ax.barh(1, (b - a) * 1e3, left=a * 1e3, height=0.6, color=COLORS.get(name, "#999999"), label=name)
    for k, (a, b, _) in enumerate(s.sends):  # alternate shades so that neighbouring buckets show apart
        ax.barh(0, (b - a) * 1e3, left=a * 1e3, height=0.6, color="#c44e52" if k % 2 == 0 else "#dd8452",
                edgecolor="k", lw=0.3, label="bucket all-reduces (predicted)" if k == 0 else None)
    if s.exposed > 0:
        ax.axvspan(s.compute_done * 1e3, (s.compute_done + s.exposed) * 1e3, color="#c44e52", alpha=0.12,
                   label=f"exposed: {s.exposed * 1e3:.1f} ms")
    ax.axvline(s.compute_done * 1e3, color="k", lw=0.8, ls="--", label="last bucket ready")
    ax.set_yticks([1, 0], ["compute (recorded)", f"link: {prediction.link.name}"])
    ax.set_xlabel("time since step start (ms)")
    ax.set_title(f"{prediction.source} on {prediction.world_size} ranks over {prediction.link.name} "
                 f"(a model): step {s.step}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside the data
    fig.tight_layout()
    plt.close(fig)
    return fig
