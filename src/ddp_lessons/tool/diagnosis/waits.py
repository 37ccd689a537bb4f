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

import statistics
from dataclasses import dataclass, field

from .measures import compute

LATE_MOST = 0.75     # imbalance: one rank is the late one in at least 3 of 4 all-reduces ...
MARGIN = 0.03        # ... and its median compute per step is at least 3% above the others'
MIN_SYNCS = 5        # ... over at least 5 all-reduces with a compute gap (fewer decide nothing)


@dataclass(frozen=True)
class RankWaits:
    """One rank's waits for the others, seconds: `charged` to what the late rank did more, by what
    (("outside", name), ("data",), ("collectives",), ("untimed",)); the rest explained by the late rank's
    compute, as `imbalance` (one rank steadily slower) or `jitter` (the late rank changing, or nothing
    explains it)."""
    charged: dict = field(default_factory=dict)
    imbalance: float = 0.0
    jitter: float = 0.0

    def charged_to(self, *what: str) -> float:
        """The seconds charged to `what`: `charged_to("data")`, `charged_to("outside", name)`."""
        return self.charged.get(what, 0.0)

    @property
    def total(self) -> float:
        return self.imbalance + self.jitter + sum(self.charged.values())

    def scaled(self, factor: float) -> RankWaits:
        return RankWaits({k: v * factor for k, v in self.charged.items()}, self.imbalance * factor,
                         self.jitter * factor)


@dataclass(frozen=True)
class Waits:
    """Every wait of a run taken apart: `ranks` (a `RankWaits` per rank, by position); `late` (which rank
    was late, per all-reduce with a compute gap); `slower` (the rank named steadily slower, or None), the
    share of those all-reduces it was late at (`late_share`), and per phase its median seconds per step
    beyond the others' (`gap`); `charges`: (all-reduce index, waiting rank, late rank, what, seconds)."""
    ranks: list
    late: list = field(default_factory=list)
    slower: int | None = None
    gap: dict = field(default_factory=dict)
    late_share: float = 0.0
    charges: list = field(default_factory=list)


def _shift(rank, ranks) -> float:
    """Seconds to add to this rank's own times to put them on the common axis."""
    clocks = [r.clock for r in ranks]
    mine = rank.clock
    if all("ref_host" in c for c in clocks) and len({c.get("host") for c in clocks}) == 1:
        return mine["ref_host"] - clocks[0]["ref_host"]   # one host: one perf_counter for every process
    return mine.get("offset") or 0.0


def _overlap(a, b, x, y) -> float:
    return max(0.0, min(b, y) - max(a, x))


def _parts(rank, a, b) -> dict[tuple, float]:
    """What this rank did in (a, b] of its own axis: outside work by name, data, compute, untimed. On a
    GPU the data wait is what the device waited (`data_stall`, on the device's axis like the rest), not
    the host's wait, which queued work may have hidden."""
    out: dict[tuple, float] = {}
    for o in rank.outside:
        k = ("outside", o["name"])
        out[k] = out.get(k, 0.0) + _overlap(a, b, o["start"], o["end"])
    data = comp = coll = 0.0
    for s in rank.steps():
        t0 = s.t_start or 0.0
        if t0 >= b or t0 + s.step_time <= a:
            continue
        seen = s.data_stall if rank.on_gpu and s.data_stall is not None else s.data
        data += _overlap(a, b, t0, t0 + (seen or 0.0))
        for k, (x, y) in s.phases.items():
            if k == "backward":
                y -= s.exposed or 0.0   # its compute only: the rest is the all-reduce
            comp += _overlap(a, b, t0 + x, t0 + y)
        for x, y in s.collective_spans:   # the script's own collectives, inside its phases
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
        if not s.all_reduced or s.sync is False:
            continue   # sent nothing (no_sync): no all-reduce to meet at
        if s.wait is not None and s.ready is not None:
            out.append((s, s.ready, s.ready + (s.exposed or 0.0)))
    return out


def attribute(ranks, shared: bool = False) -> Waits:
    """Every rank's waits (by position), each charged to what made the late rank late (`Waits`)."""
    n = len(ranks)
    if n < 2:
        return Waits([RankWaits() for _ in ranks])
    charged: list[dict] = [{} for _ in ranks]
    jitter, comp = [0.0] * n, [0.0] * n     # comp: what the late rank's extra compute explains
    late_ranks: list[int] = []
    charges: list[tuple] = []               # (all-reduce index, waiting rank, late rank, what, seconds)
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
            w = syncs[i][j][0].wait or 0.0
            if i == q or w <= 0:
                continue
            mine = _parts(ranks[i], *span(i))
            gap = {k: late.get(k, 0.0) - mine.get(k, 0.0) for k in late}
            for k in sorted((k for k in gap if k[0] == "outside"), key=lambda k: -gap[k]) + \
                    [("data",), ("collectives",), ("untimed",)]:
                take = min(w, max(0.0, gap[k]))
                if take > 0:
                    charged[i][k] = charged[i].get(k, 0.0) + take
                    charges.append((j, ranks[i].rank, ranks[q].rank, k, take))
                    w -= take
            take = min(w, max(0.0, gap[("compute",)]))
            comp[i] += take
            if take > 0:
                late_ranks.append(ranks[q].rank)
            jitter[i] += w - take     # nothing the late rank did more explains it
    slower, gap_by_phase = _classify(ranks, late_ranks, shared)
    # compute-explained waits: imbalance where one rank is steadily slower, else jitter
    per = [RankWaits(c, x, j) if slower is not None else RankWaits(c, 0.0, j + x)
           for c, j, x in zip(charged, jitter, comp, strict=True)]
    share = late_ranks.count(statistics.mode(late_ranks)) / len(late_ranks) if late_ranks else 0.0
    return Waits(per, late_ranks, slower, gap_by_phase, share, charges)


def _mode(late: list) -> int | None:
    """The rank late most often (None: none was)."""
    return statistics.mode(late) if late else None


def _clean(s, shared: bool) -> float:
    """A step's compute that communication does not overlap: on shared cores the backward runs beside
    gloo's all-reduce threads, so a slower backward there is no evidence of uneven work."""
    return compute(s) - (s.backward_own if shared else 0.0)


def _classify(ranks, late: list, shared: bool) -> tuple[int | None, dict]:
    """(the slower rank, its median seconds per step beyond the others' per compute phase) where one rank
    is late in most all-reduces and computes more, by a margin and in most steps, in compute that
    communication does not overlap; (None, {}) where not."""
    slower = _mode(late)
    meds = {r.rank: statistics.median(_clean(s, shared) for s in r.steps()) if r.steps() else 0.0 for r in ranks}
    others = [v for k, v in meds.items() if k != slower]
    steady = (len(late) >= MIN_SYNCS and late.count(slower) >= LATE_MOST * len(late) and others
              and meds[slower] >= (1 + MARGIN) * statistics.median(others) and _most_steps(ranks, slower, shared))
    if not steady:
        return None, {}
    slow = next(r for r in ranks if r.rank == slower)
    fast = [r for r in ranks if r.rank != slower]

    def med(r, key):
        return statistics.median(getattr(s, key) or 0.0 for s in r.steps())
    gap = {}
    for key in ("data", "forward", "backward_compute", "optimizer"):
        if key != "backward_compute" or not shared:
            gap[key] = med(slow, key) - statistics.median(med(r, key) for r in fast)
    return slower, gap


def _most_steps(ranks, slower, shared) -> bool:
    """The slower rank's clean compute is the largest in at least LATE_MOST of the steps."""
    by_rank = {r.rank: [_clean(s, shared) for s in r.steps()] for r in ranks}
    n = min(len(v) for v in by_rank.values())
    if not n:
        return False
    wins = sum(by_rank[slower][i] >= max(v[i] for k, v in by_rank.items() if k != slower) for i in range(n))
    return wins >= LATE_MOST * n
