"""The all-reduce as the timing hook sees it, read per rank (notebook 05).

A rank's hook interval runs from the moment DDP hands it the bucket (its gradients are ready) to the
moment the all-reduce has completed. The ranks finish an all-reduce together, so per step the rank
that handed its bucket over last has the shortest interval: the all-reduce itself as it ran inside
training (slowed, on shared cores, by the other ranks' work), with no wait for a peer. The rank that
handed over first has the longest: that plus its wait for the last peer. Per step, the waiting
share is (longest - shortest) / longest. Defined in notebook 05_case2_where_time_goes.
"""

from __future__ import annotations

import statistics


def synced(times: dict, skip: int = 2) -> list[tuple[int, float]]:
    """(step index, hook interval in s) of every step that all-reduced, after the first `skip` steps
    (DDP rebuilds its buckets after the first)."""
    return [(s["step"], s["allreduce"]) for s in times["steps"][skip:] if s.get("allreduce_calls")]


def per_rank(ranks_times: list[dict], skip: int = 2) -> dict:
    """Per rank: the median, min and max hook interval over its synced steps; per step (matched by
    index: every rank runs the same steps), the shortest interval over the ranks (the all-reduce with
    no wait), the longest (that plus the first rank's wait for the last) and the waiting share
    (longest - shortest) / longest, with their medians. Seconds. Defined in notebook 05_case2_where_time_goes."""
    rows = []
    for t in ranks_times:
        v = [x for _, x in synced(t, skip)]
        if not v:
            raise ValueError(f"rank {t.get('rank')} has no all-reduce after step {skip}: "
                             "run more micro-steps (epochs) or lower `skip`")
        rows.append({"rank": t.get("rank"), "median": statistics.median(v), "min": min(v), "max": max(v),
                     "n": len(v)})
    by_step = {}
    for t in ranks_times:
        for i, x in synced(t, skip):
            by_step.setdefault(i, []).append(x)
    full = [v for v in by_step.values() if len(v) == len(ranks_times)]
    shortest, longest = [min(v) for v in full], [max(v) for v in full]
    share = [(b - a) / b for a, b in zip(shortest, longest, strict=True) if b > 0]
    return {"ranks": rows, "shortest_per_step": shortest, "longest_per_step": longest, "waiting_share": share,
            "shortest": statistics.median(shortest) if full else None,
            "longest": statistics.median(longest) if full else None}


def per_epoch(ranks_times: list[dict]) -> list[float]:
    """Per rank: the hook's total time per epoch (every step, warm-up included)."""
    return [sum(s["allreduce"] for s in t["steps"]) / max(1, len(t["epochs"])) for t in ranks_times]


def table(read: dict, alone_s: float | None = None, alone_best_s: float | None = None) -> str:
    """The per-rank reading as lines of text (milliseconds), and the two terms it holds: the waiting
    share, and the all-reduce's time inside training against the same all-reduce timed alone (`alone_s`:
    its median; `alone_best_s`: its fastest), the contention term. Defined in notebook 05_case2_where_time_goes."""
    lines = [f"rank {r['rank']}: median {r['median'] * 1e3:6.2f} ms, min {r['min'] * 1e3:6.2f}, "
             f"max {r['max'] * 1e3:6.2f} over {r['n']} all-reduces" for r in read["ranks"]]
    if read["shortest"] is None:
        return "\n".join(lines)
    share = sorted(read["waiting_share"])
    lines.append(f"per step, median: longest interval {read['longest'] * 1e3:.2f} ms (the first rank in: "
                 f"all-reduce + waiting), shortest {read['shortest'] * 1e3:.2f} ms (the last rank in: no wait)")
    lines.append(f"waiting, (longest - shortest) / longest per step: median {statistics.median(share):.0%}, "
                 f"{share[0]:.0%} .. {share[-1]:.0%} over {len(share)} steps")
    if alone_s:
        best = (f", {read['shortest'] / alone_best_s:.1f}x its fastest ({alone_best_s * 1e3:.2f} ms)"
                if alone_best_s else "")
        lines.append(f"contention: the shortest interval is {read['shortest'] / alone_s:.1f}x the same all-reduce "
                     f"alone ({alone_s * 1e3:.2f} ms, median){best}")
    return "\n".join(lines)
