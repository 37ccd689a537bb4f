"""Each second of waiting charged once, to what made the slowest rank late.

At an all-reduce every rank waits for the last one to be ready. Between two all-reduces every rank
starts together (the previous one released them all; before the first, the timer's reference), so a
rank's wait at the next one is how much longer the late rank took since then. `attribute` takes each
wait apart by what the late rank did more than the waiting one in that span: named work outside the
steps (one rank evaluating, saving), the data wait, untimed host work, and compute. What compute
explains is imbalance when one rank is the late one in most all-reduces and computes more by a
margin, else jitter; what nothing explains is jitter too. All-reducing steps are matched by order.
"""

from __future__ import annotations

from typing import Any

import statistics

from ..timing.sync import ready_time
from .measures import compute

LATE_MOST = 0.75     # imbalance: one rank is the late one in at least 3 of 4 all-reduces ...
MARGIN = 0.03        # ... and its median compute per step is at least 3% above the others'
MIN_SYNCS = 5        # ... over at least 5 all-reduces with a compute gap (fewer decide nothing)


def _shift(rank, ranks) -> float:
    """Seconds to add to this rank's own times to put them on the common axis."""
    clocks = [r.timer.get("clock") or {} for r in ranks]
    mine = rank.timer.get("clock") or {}
    if all("ref_host" in c for c in clocks) and len({c.get("host") for c in clocks}) == 1:
        return mine["ref_host"] - clocks[0]["ref_host"]   # one host: one perf_counter for every process
    return mine.get("offset") or 0.0


def _overlap(a, b, x, y) -> float:
    return max(0.0, min(b, y) - max(a, x))


def _parts(rank, a, b) -> dict[tuple, float]:
    """What this rank did in (a, b] of its own axis: outside work by name, data, compute, untimed. On a
    GPU the data wait is what the device waited (`data_stall`, on the device's axis like the rest), not
    the host's wait, which queued work may have hidden."""
    out: dict[tuple, float] = {("outside", o["name"]): 0.0 for o in rank.outside}
    for o in rank.outside:
        out[("outside", o["name"])] += _overlap(a, b, o["start"], o["end"])
    data = comp = coll = 0.0
    key = "data_stall" if rank.on_gpu else "data"
    for s in rank.steps():
        t0 = s["t_start"]
        if t0 >= b or t0 + s["step_time"] <= a:
            continue
        data += _overlap(a, b, t0, t0 + (s.get(key, s.get("data")) or 0.0))
        for k, (x, y) in (s.get("phases") or {}).items():
            if k == "backward":
                y -= s.get("exposed", 0.0) or 0.0   # its compute only: the rest is the all-reduce
            comp += _overlap(a, b, t0 + x, t0 + y)
        for x, y in s.get("collective_spans") or ():   # the script's own collectives, inside its phases
            c = _overlap(a, b, t0 + x, t0 + y)
            coll += c
            comp -= c
    out[("data",)], out[("compute",)], out[("collectives",)] = data, max(0.0, comp), coll
    out[("untimed",)] = max(0.0, (b - a) - sum(out.values()))
    return out


def _syncs(rank) -> list:
    """(step, ready, release) on the rank's own axis for each step with a wait, in order."""
    out = []
    for s in rank.steps():
        if not (s.get("buckets") or s.get("allreduce_calls")) or s.get("sync") is False:
            continue   # sent nothing (no_sync): no all-reduce to meet at
        ready = s.get("ready", ready_time(s))
        if s.get("wait") is not None and ready is not None:
            out.append((s, ready, ready + (s.get("exposed") or 0.0)))
    return out


def attribute(ranks, shared: bool = False) -> dict:
    """Per rank (by position): `charged` {("outside", name) | ("data",) | ("untimed",): seconds},
    `imbalance` and `jitter` seconds; and for the run: `late` (which rank was late, per all-reduce
    with a compute gap), `slower` (the rank named slower, or None) and its `gap` per phase."""
    n = len(ranks)
    per: list[dict[str, Any]] = [{"charged": {}, "imbalance": 0.0, "jitter": 0.0, "compute": 0.0} for _ in ranks]
    # `charges`: (all-reduce index j, the waiting rank, the late rank, what, seconds) for each charge
    out: dict[str, Any] = {"ranks": per, "late": [], "slower": None, "gap": {}, "charges": []}
    if n < 2:
        return out
    syncs = [_syncs(r) for r in ranks]
    shifts = [_shift(r, ranks) for r in ranks]
    # before the first all-reduce the ranks last met where the timer took its reference: a barrier, or
    # (the doctor's) right after DDP's constructor, whose broadcast every rank passes
    starts = [0.0] * n
    for j in range(min(len(x) for x in syncs)):
        common = [syncs[i][j][1] + shifts[i] for i in range(n)]
        q = max(range(n), key=common.__getitem__)

        def span(i, j=j):
            return (syncs[i][j - 1][2] if j else starts[i], syncs[i][j][1])
        late = _parts(ranks[q], *span(q))
        for i in range(n):
            w = syncs[i][j][0].get("wait") or 0.0
            if i == q or w <= 0:
                continue
            mine = _parts(ranks[i], *span(i))
            gap = {k: late.get(k, 0.0) - mine.get(k, 0.0) for k in late}
            for k in sorted((k for k in gap if k[0] == "outside"), key=lambda k: -gap[k]) + \
                    [("data",), ("collectives",), ("untimed",)]:
                take = min(w, max(0.0, gap[k]))
                if take > 0:
                    per[i]["charged"][k] = per[i]["charged"].get(k, 0.0) + take
                    out["charges"].append((j, ranks[i].rank, ranks[q].rank, k, take))
                    w -= take
            take = min(w, max(0.0, gap[("compute",)]))
            per[i]["compute"] += take
            if take > 0:
                out["late"].append(ranks[q].rank)
            per[i]["jitter"] += w - take     # nothing the late rank did more explains it
    _classify(ranks, out, shared)
    return out


def _clean(s, shared: bool) -> float:
    """A step's compute that communication does not overlap: on shared cores the backward runs beside
    gloo's all-reduce threads, so a slower backward there is no evidence of uneven work."""
    return compute(s) - (s.get("backward_compute", s.get("backward", 0.0)) if shared else 0.0)


def _classify(ranks, out, shared: bool) -> None:
    """Compute-explained waits: imbalance when one rank is late in most all-reduces and computes more, by
    a margin and in most steps, in compute that communication does not overlap; else jitter."""
    late = out["late"]
    slower = statistics.mode(late) if late else None
    meds = {r.rank: statistics.median(_clean(s, shared) for s in r.steps()) if r.steps() else 0.0 for r in ranks}
    others = [v for k, v in meds.items() if k != slower]
    steady = (len(late) >= MIN_SYNCS and late.count(slower) >= LATE_MOST * len(late) and others
              and meds[slower] >= (1 + MARGIN) * statistics.median(others) and _most_steps(ranks, slower, shared))
    for p in out["ranks"]:
        key = "imbalance" if steady else "jitter"
        p[key] += p.pop("compute")
    if steady:
        out["slower"] = slower
        slow = next(r for r in ranks if r.rank == slower)
        fast = [r for r in ranks if r.rank != slower]

        def med(r, key):
            return statistics.median(s.get(key) or 0.0 for s in r.steps())
        for key in ("data", "forward", "backward_compute", "optimizer"):
            if key != "backward_compute" or not shared:
                out["gap"][key] = med(slow, key) - statistics.median(med(r, key) for r in fast)
    out["late_share"] = late.count(slower) / len(late) if late else 0.0


def _most_steps(ranks, slower, shared) -> bool:
    """The slower rank's clean compute is the largest in at least LATE_MOST of the steps."""
    by_rank = {r.rank: [_clean(s, shared) for s in r.steps()] for r in ranks}
    n = min(len(v) for v in by_rank.values())
    if not n:
        return False
    wins = sum(by_rank[slower][i] >= max(v[i] for k, v in by_rank.items() if k != slower) for i in range(n))
    return wins >= LATE_MOST * n
