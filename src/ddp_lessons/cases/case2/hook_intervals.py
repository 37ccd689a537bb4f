"""The all-reduce as the timing hook sees it, read per rank (notebook 05).

The hook's interval on a rank runs from the moment DDP hands it the bucket (this rank's gradients are
ready) to the moment the all-reduce has completed: the transfer (the wire), waiting for the slowest
peer to hand over its own bucket, and queueing behind earlier buckets. The ranks finish an all-reduce
together, so per step the rank that handed over last has the shortest interval, an upper bound on the
wire time inside training, and the rank that handed over first the longest: the wire plus the wait for
the last peer. Defined in notebook 05_case2_where_time_goes.
"""

from __future__ import annotations

import statistics


def synced(times: dict, skip: int = 2) -> list[tuple[int, float]]:
    """(step index, hook interval in s) of every step that all-reduced, after
    the first `skip` steps (DDP rebuilds its buckets after the first)."""
    return [(s["step"], s["allreduce"]) for s in times["steps"][skip:] if s.get("allreduce_calls")]


def per_rank(ranks_times: list[dict], skip: int = 2) -> dict:
    """Per rank: the median, min and max hook interval over its synced steps;
    across ranks: the min and max of those medians; per step, the shortest
    interval over the ranks (an upper bound on the wire time) and the longest
    (the first rank to hand over: wire plus the wait for the last), with their
    medians. Seconds. Steps are matched by index: every rank runs the same steps.
    Defined in notebook 05_case2_where_time_goes."""
    rows = []
    for t in ranks_times:
        v = [x for _, x in synced(t, skip)]
        if not v:
            raise ValueError(f"rank {t.get('rank')} has no all-reduce after step {skip}: "
                             "run more micro-steps (epochs) or lower `skip`")
        rows.append({"rank": t.get("rank"), "median": statistics.median(v), "min": min(v),
                     "max": max(v), "n": len(v)})
    by_step = {}
    for t in ranks_times:
        for i, x in synced(t, skip):
            by_step.setdefault(i, []).append(x)
    full = [v for v in by_step.values() if len(v) == len(ranks_times)]
    # The longest holds a wait (on 2 cores with 3 ranks one rank is always descheduled); neither holds
    # queueing behind earlier buckets (case 2's 0.54 MB fits one bucket).
    shortest, longest = [min(v) for v in full], [max(v) for v in full]
    medians = [r["median"] for r in rows]
    return {"ranks": rows, "median_min": min(medians), "median_max": max(medians),
            "shortest_per_step": shortest, "longest_per_step": longest,
            "wire_bound": statistics.median(shortest) if full else None,
            "first_in": statistics.median(longest) if full else None}


def per_epoch(ranks_times: list[dict]) -> list[float]:
    """Per rank: the hook's total time per epoch (every step, warm-up included).
    Defined in notebook 05_case2_where_time_goes."""
    return [sum(s["allreduce"] for s in t["steps"]) / max(1, len(t["epochs"])) for t in ranks_times]


def table(read: dict) -> str:
    """The per-rank reading as lines of text (milliseconds). Defined in notebook 05_case2_where_time_goes."""
    lines = [f"rank {r['rank']}: median {r['median'] * 1e3:6.2f} ms, min {r['min'] * 1e3:6.2f}, "
             f"max {r['max'] * 1e3:6.2f} over {r['n']} all-reduces" for r in read["ranks"]]
    lines.append(f"across ranks, the medians span {read['median_min'] * 1e3:.2f} .. "
                 f"{read['median_max'] * 1e3:.2f} ms")
    if read["wire_bound"] is not None:
        lines.append(f"per step, the shortest interval (the last rank in; upper bound on the wire): "
                     f"{read['wire_bound'] * 1e3:.2f} ms median")
        lines.append(f"per step, the longest interval (the first rank in; wire + waiting for the last): "
                     f"{read['first_in'] * 1e3:.2f} ms median")
    return "\n".join(lines)
