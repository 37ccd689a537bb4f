"""One rank's totals from its steps (seconds, bytes, counts): `RankMeasures`, what the findings read.

The wall is the run's start to `result()`; the window is the part from the first step on (the
start-up before it is reported apart). DDP's timings sampled on a GPU (every k-th step) are scaled
to every step. Micro-steps are told from optimizer steps by the timer's `optimizer_steps` (torch's
optimizer hook), or, in results from before it saw them, by an "optimizer" phase.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

# DDP's first steps (one bucket of every gradient, then the buckets rebuilt in ready order) are left
# out of the per-bucket reading: their order is not the run's.
WARMUP_STEPS = 2
COMPUTE = ("forward", "backward_compute", "optimizer")


@dataclass(frozen=True)
class BucketSummary:
    """The buckets of a median step after warm-up (mode "full"): their `count` and `bytes`, the last-ready
    one's bytes and index and how long after the one before it it was ready (`gap`); `last_seconds`: its
    exposed seconds beyond every earlier bucket and the wait, over the run; `durations`: (bytes, seconds)
    of every bucket's all-reduce."""
    count: int
    bytes: int
    last_bytes: int
    last_index: int
    gap: float
    last_seconds: float
    durations: list = field(default_factory=list)


@dataclass(frozen=True)
class RankMeasures:
    """One rank's totals, seconds unless said: its `steps`, `optimizer_steps` and micro-steps that
    all-reduced (`micro_synced`) or not (`micro_quiet`); `wait` for a slower rank and `exposed` all-reduce
    (DDP's sampled timings scaled to every step, `sampled_every`); `transfer`: the exposed part after
    every rank was ready, micro-steps' apart (`accumulation`, and `accumulation_busy` their whole
    all-reduce but the waits); the data wait (`data`: what the device waited on a GPU; `data_host`; the
    part paid once per launch, `data_launch`); per step: `allreduce_step`, `step_time`, `compute_step`;
    `compute`; all-reduce `calls` and `bytes`; the script's `collectives` and their calls; the timing
    hook's own time; `buckets` (None without them); from the account (`account`: there is one): `wall`,
    `window` (from the first step on), `startup`, `outside` work by name, `untimed`, `after` the last step."""
    rank: int
    steps: int
    optimizer_steps: int
    micro_synced: int
    micro_quiet: int
    sampled_every: int
    device: str
    wait: float
    exposed: float
    data: float
    data_host: float
    data_launch: float
    allreduce_step: float
    step_time: float
    compute_step: float
    compute: float
    calls: int
    bytes: int
    has_exposed: bool
    has_wait: bool
    collectives: float
    collective_calls: int
    hook_time: float
    buckets: BucketSummary | None
    accumulation: float
    accumulation_busy: float
    transfer: float
    wall: float
    window: float
    outside: dict
    startup: float | None
    untimed: float | None
    after: float
    account: bool
    parts: dict


def sampled_total(steps, key: str, every: int) -> float:
    """The sum of the number `key` (a `Step` field) over `steps`; where DDP's timings were sampled
    (`every` > 1), the steps without it get the mean of the sampled steps after DDP's first 10 (its
    warm-up, always sampled)."""
    have = [v for s in steps if (v := getattr(s, key)) is not None]
    total = float(sum(have))
    if every <= 1 or not have or len(have) == len(steps):
        return total
    later = [v for s in steps if (v := getattr(s, key)) is not None and (s.step or 0) >= 10] or have
    return total + (len(steps) - len(have)) * sum(later) / len(later)


def compute(s) -> float:
    """A step's compute: its phases but the data wait, the communication in the backward, the script's own
    collectives and the timing hook's own time."""
    other = sum(b - a for k, (a, b) in s.phases.items() if k not in ("forward", "backward", "optimizer"))
    return max(0.0, (s.forward or 0.0) + s.backward_own + (s.optimizer or 0.0)
               + other - (s.collectives or 0.0) - (s.hook_time or 0.0))


def kinds(r) -> tuple[list, list, list]:
    """(optimizer steps, micro-steps that all-reduced, micro-steps that did not) of a `Rank`. Micro-steps
    after the last optimizer step (a run stopped or interrupted in the middle of one) are left out: they
    are not a whole optimizer step's."""
    steps = r.steps()
    if r.knows_optimizer_steps():
        last = max((i for i, s in enumerate(steps) if s.optimizer_steps), default=len(steps) - 1)
        steps = steps[:last + 1]
        opt = [s for s in steps if s.optimizer_steps]
        micro = [s for s in steps if not s.optimizer_steps and (s.forwards or s.phases)]
    else:  # an older result: an optimizer phase marks the optimizer step, where the loop timed one
        opt = [s for s in steps if "optimizer" in s.phases]
        micro = [s for s in steps if "optimizer" not in s.phases] if opt else []
    synced = [s for s in micro if s.sync or s.allreduce_calls]
    quiet = [s for s in micro if not (s.sync or s.allreduce_calls)]
    return opt, synced, quiet


def launch_data(steps, starts, key: str) -> float:
    """The part of the data wait paid once per launch: the first pass's first step (loader workers
    starting) beyond what later passes' first steps wait (0 where they wait as long)."""
    starts = [i for i in starts or [] if i < len(steps)]
    if not starts:
        return 0.0
    firsts = [getattr(steps[i], key) or 0.0 for i in starts]
    others = firsts[1:] or [statistics.median(getattr(s, key) or 0.0 for s in steps)]
    return max(0.0, firsts[0] - statistics.median(others))


def buckets(steps) -> BucketSummary | None:
    """The buckets of the steps after warm-up that have them (mode "full"): per step their count, bytes,
    and per bucket its duration; the last-ready bucket's exposed seconds beyond every earlier bucket and
    the wait (no cap or order of the others changes them); None without buckets."""
    rows, durations, last_secs = [], [], 0.0
    for s in steps[WARMUP_STEPS:]:
        b = [x for x in s.buckets if x.end is not None]
        if not b:
            continue
        last = max(b, key=lambda x: x.start)
        others = [x for x in b if x is not last]
        before = max((x.end for x in others), default=last.start)
        own = max(0.0, last.end - max(before, last.start + (s.wait or 0.0)))
        last_secs += min(own, max(0.0, (s.exposed or 0.0) - (s.wait or 0.0)))
        gap = last.start - max((x.start for x in others), default=last.start)
        rows.append((len(b), sum(x.bytes for x in b), last.bytes, last.index, gap))
        durations += [(x.bytes, x.end - x.start) for x in b]
    if not rows:
        return None
    rows.sort()
    n, total, last_bytes, last_index, gap = rows[len(rows) // 2]
    return BucketSummary(n, total, last_bytes, last_index, gap, last_secs, durations)


def measures(r) -> RankMeasures:
    """One `Rank`'s totals (seconds, bytes, counts)."""
    steps, acc = r.steps(), r.account
    every = int(r.ddp_logging.get("sample_every") or 1)
    gpu = r.on_gpu and any(s.data_stall is not None for s in steps)
    data_key = "data_stall" if gpu else "data"   # on a GPU: what the device waited, not the host

    def per_step(key, among=steps):  # the median over the steps that have it (a sampled number is not 0 elsewhere)
        have = [v for s in among if (v := getattr(s, key)) is not None]
        return statistics.median(have) if have else 0.0
    opt, synced, quiet = kinds(r)
    wait, exposed = sampled_total(steps, "wait", every), sampled_total(steps, "exposed", every)
    micro_wait = sampled_total(synced, "wait", every)
    micro_exposed = sampled_total(synced, "exposed", every) - micro_wait
    accumulation = max(0.0, micro_exposed) if opt and synced else 0.0
    synced_ids = {id(x) for x in synced}
    m = RankMeasures(
        rank=r.rank, steps=len(steps), optimizer_steps=len(opt), micro_synced=len(synced), micro_quiet=len(quiet),
        sampled_every=every, device=r.device, wait=wait, exposed=exposed,
        data=sum(getattr(s, data_key) or 0.0 for s in steps), data_host=sum(s.data or 0.0 for s in steps),
        data_launch=launch_data(steps, r.pass_starts, data_key),
        # per step that all-reduced: a no_sync micro-step's 0 is not a quicker all-reduce
        allreduce_step=per_step("allreduce", [s for s in steps if s.allreduce_calls or s.allreduce]),
        step_time=per_step("step_time"),
        compute_step=statistics.median(compute(s) for s in steps) if steps else 0.0,
        compute=sum(compute(s) for s in steps),
        calls=sum(s.allreduce_calls or 0 for s in steps), bytes=sum(s.allreduce_bytes or 0 for s in steps),
        has_exposed=any(s.exposed is not None for s in steps), has_wait=any(s.wait is not None for s in steps),
        collectives=sum(s.collectives or 0.0 for s in steps),
        collective_calls=sum(s.collective_calls or 0 for s in steps),
        hook_time=sum(s.hook_time or 0.0 for s in steps),
        buckets=buckets([s for s in steps if id(s) not in synced_ids]),
        accumulation=accumulation,
        # their whole all-reduce but the waits: what gloo's threads took from compute on shared cores
        accumulation_busy=max(0.0, sampled_total(synced, "allreduce", every) - micro_wait) if opt and synced else 0.0,
        transfer=max(0.0, exposed - wait - accumulation),
        wall=sum(s.step_time for s in steps), window=sum(s.step_time for s in steps), outside={}, startup=None,
        untimed=None, after=0.0, account=False, parts={})
    return m if acc is None else _with_account(m, acc)


def _with_account(m: RankMeasures, acc: dict) -> RankMeasures:
    """`m` with the account's wall, window, start-up, outside work, untimed and after-last-step seconds."""
    startup = (acc.get("startup") or 0.0) + acc["before_first_step"]
    in_steps = acc["in_steps"]
    return replace(m, wall=acc["wall"] + (acc.get("startup") or 0.0), startup=startup,
                   window=acc["wall"] - acc["before_first_step"], outside=dict(acc["outside"]),
                   untimed=in_steps["remainder"] + acc["between_steps"], after=acc["after_last_step"],
                   parts={**in_steps["phases"], "data": in_steps["data"], **acc["outside"]}, account=True)
