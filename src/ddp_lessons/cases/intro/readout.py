"""What notebook 00's workers and records return, read back as numbers: the sweep's best times and the two
ratios its claim reads; the timer against DDP's own clock, step by step; where a known delay went; the
recorded cost of timing; and where a record comes from. Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from ...course import replay
from ...course.timer_validation.check import validation_summary
from ...tool.runs import Run, Step, read
from . import train

# Each size's best of 150 interleaved rounds on 2 shared cores gave 64 KiB / 4 KiB 0.69 to 1.40 and
# 16 MiB / 4 MiB 3.61 to 5.60 over 20 launches at load 1.4 to 3 (50 rounds: 0.70 to 1.41, 3.55 to 5.12 over
# 12 launches at load 2 to 4.4; the sweep's blocks, one size after another, gave 0.47 and 6.7). Both
# ratios sit near a bound of the model by nature (1x for pure latency, 4x for pure bytes). Below 1x (a
# larger message faster) is noise: that bound is widened by this factor, 1 / 1.75 = 0.57x, before a ratio
# counts as impossible. Above 4x is not noise (the large ratio is over 4x in most launches): the bandwidth
# falls with size here. Why is not measured (the buffers outgrowing the caches, gloo choosing another
# algorithm by size, the loopback's TCP buffers are each candidates); the notebook prints it as a reading.
NOISE = 0.75
RESOLUTION = 50e-6   # two host clocks, a Python hook and a callback: tens of microseconds apart at best


@dataclass(frozen=True)
class Interleaved:
    """What `workers.interleaved` returned on one rank: the `sizes` (bytes), and per size its seconds per round."""
    sizes: list
    times: list


@dataclass(frozen=True)
class DdpTimes:
    """DDP's own logging of one step (`timing.ddp_logging_times`, s): its exposed all-reduce, its comm time
    and the part of it overlapped with the backward's compute (None where the logging has none)."""
    exposed: float
    backward_comm_time: float | None = None
    backward_compute_comm_overlap_time: float | None = None


@dataclass(frozen=True)
class Compare:
    """A doctor-cost arm's paired comparison: the command alone's median step (s), its rounds, its verdict."""
    a_median: float
    rounds: int
    verdict: str


@dataclass(frozen=True)
class Arm:
    """One arm of a doctor-cost record's workload: its `Compare`, the doctor's median cost and its range over
    rounds, and the doctor's own report of its cost."""
    compare: Compare
    median_cost: float
    cost_range: list
    self_reported: Any


@dataclass(frozen=True)
class CostRun:
    """A timer-cost record's run (`results.runs.cost`): its ranks (rank 0's `rounds`: mode -> its numbers,
    per round) and the per-call costs (`micro`, microseconds)."""
    ranks: list
    micro: dict
    rounds = property(lambda self: self.ranks[0]["rounds"])

    @classmethod
    def of(cls, rec: dict) -> CostRun:
        return read(cls, rec["results"]["runs"]["cost"])


def best_of(rows: list[dict]) -> list[dict]:
    """The sweep's rows (`allreduce.summarize`) with each size's best iteration as its time, algbw and
    busbw recomputed: what the link does between the scheduler's interruptions.
    Defined in notebook 00_first_launch."""
    return [dict(r, time=r["best"], algbw=r["bytes"] / r["best"],
                 busbw=r["busbw"] * r["time"] / r["best"]) for r in rows]


def small_sizes(best: list[dict], upto: int = 64 * 1024) -> tuple[float, float]:
    """The fastest and slowest of the sweep's best times (`best_of`) at sizes up to `upto` bytes, in seconds:
    where the time hardly moves with the size, the all-reduce's latency. Defined in notebook 00_first_launch."""
    times = [r["time"] for r in best if r["bytes"] <= upto]
    return min(times), max(times)


def ratios(ranks: list[dict]) -> dict:
    """The two ratios the sweep's claim reads, from what `workers.interleaved` returned on every rank
    (sizes 4 KiB, 64 KiB, a quarter of the largest, the largest): each size's best round (a call is done
    when its slowest rank is), then "small", 64 KiB over 4 KiB (16x the bytes: the model allows 1x to 16x,
    latency-bound under 4x) and "large", the largest over a quarter of it (4x the bytes: the model allows
    1x to 4x, bandwidth-bound over 2x). Defined in notebook 00_first_launch."""
    every = [read(Interleaved, r) for r in ranks]
    sizes = every[0].sizes
    best = {s: min(max(r.times[i][k] for r in every) for k in range(len(every[0].times[i])))
            for i, s in enumerate(sizes)}
    return {"small": best[sizes[1]] / best[sizes[0]], "large": best[sizes[3]] / best[sizes[2]],
            "sizes": sizes, "best": best}


def misfit(r: dict, noise: float = NOISE) -> tuple[float, float]:
    """(low, high) for the claim "latency_then_bandwidth" (side "<", limit 1). low: the worse of the two
    ratios against its regime's bound (small / 4, 2 / large; 1 = on the bound); high: also against a
    larger message coming out faster, widened by `noise` (1 / (1 + noise) / small): such a sweep
    straddles the limit and decides nothing. Defined in notebook 00_first_launch."""
    regime = max(r["small"] / 4, 2 / r["large"])
    return regime, max(regime, 1 / (1 + noise) / r["small"])


def clocks(run: Run, rel: float = 0.25, resolution: float = RESOLUTION) -> dict:
    """Rank 0's exposed all-reduce per step after the warm-up, by the timer and by DDP's own logging (its
    worker returned both), and in how many steps they agree: |difference| <= `rel` of DDP's + `resolution`.
    "apart": the median |difference| of the steps that disagree (0.0 where none does); "hook": the median
    of the timer's own hook time a step (mode "full" keeps it out of `exposed`). Where the steps carry
    their buckets and DDP's comm and overlap times, timer - DDP splits exactly into "head" (DDP's compute
    end after the timer's last hand-over to the backend: the rest of the backward, overlap to DDP) minus
    "tail" (DDP's comm end after the timer's last bucket done: the training thread waking from its wait),
    medians; None otherwise. Defined in notebook 00_first_launch."""
    rank = run[0]
    theirs = [read(DdpTimes, d) for d in rank["ddp_logging"][2:]]  # entry i: step i; the last step has none
    ours = rank.steps(skip=2)[:len(theirs)]
    pairs = [(s.exposed, d.exposed) for s, d in zip(ours, theirs, strict=True)]
    off = [abs(a - b) for a, b in pairs if abs(a - b) > rel * b + resolution]
    parts = [_ends(s, d) for s, d in zip(ours, theirs, strict=True)]
    parts = [p for p in parts if p is not None]
    return {"steps": len(pairs), "agree": len(pairs) - len(off), "timer": statistics.median(a for a, _ in pairs),
            "ddp": statistics.median(b for _, b in pairs),
            "difference": statistics.median(a - b for a, b in pairs),
            "apart": statistics.median(off) if off else 0.0,
            "hook": statistics.median(s.get("hook_time", 0.0) for s in ours),
            "head": statistics.median(h for h, _ in parts) if parts else None,
            "tail": statistics.median(t for _, t in parts) if parts else None}


def _ends(step: Step, ddp: DdpTimes) -> tuple[float, float] | None:
    """(head, tail) of one step: where DDP's compute end and comm end fall after the timer's last
    hand-over and last bucket done. DDP starts its comm clock as it hands the first bucket to the hook,
    where the timer marks that bucket's `start`: on one axis, DDP's compute end is start + overlap and its
    comm end start + comm time (reducer.cpp). head - tail = timer's exposed - DDP's, exactly."""
    b = step.buckets
    if not b or ddp.backward_comm_time is None or ddp.backward_compute_comm_overlap_time is None:
        return None
    first = min(x.start for x in b)
    sent, done = max(x.handed for x in b), max(x.end for x in b)
    return (first + ddp.backward_compute_comm_overlap_time - sent,
            first + ddp.backward_comm_time - done)


def moved(base: Run, slow: Run, keys=("step_time", "exposed", "backward_compute", "forward")) -> dict:
    """How far rank 0's median step moved from `base` to `slow`, per number of the step (seconds).
    Defined in notebook 00_first_launch."""
    b, s = base[0].median_step(), slow[0].median_step()
    return {k: s[k] - b[k] for k in keys if k in b and k in s}


def cost_rounds(rec: dict) -> dict:
    """From a timer-cost record (benchmarks/timer_validation.py): mode -> its cost against DDP alone
    (`builtin`): "per_round" (in round order), "median", "lo", "hi". Defined in notebook 00_first_launch."""
    rows = [{m: v.get("s_per_step") for m, v in r.items()} for r in CostRun.of(rec).rounds]
    out = {}
    for m in (m for m in rows[0] if m != "builtin"):
        per = [r[m] / r["builtin"] - 1 for r in rows]
        out[m] = {"per_round": per, "median": statistics.median(per), "lo": min(per), "hi": max(per)}
    return out


def costlier(costs: dict, mode: str = "light", than: str = "profiler") -> tuple[int, int]:
    """In how many rounds of `cost_rounds` mode `than` cost more than `mode`, and of how many.
    Defined in notebook 00_first_launch."""
    pairs = list(zip(costs[mode]["per_round"], costs[than]["per_round"], strict=True))
    return sum(b > a for a, b in pairs), len(pairs)


def cost_spread(c: dict, digits: int = 0) -> str:
    """A cost over rounds (a mode of `cost_rounds`, a row of `doctor_cost`: "median", "lo", "hi") in
    words: "median +5%, unresolved (-6% to +41%)", "resolved" where every round is on one side of zero.
    Notebook 00's opening quotes it (tests/cases/intro/test_intro_answers.py). Defined in notebook 00_first_launch."""
    word = "unresolved" if c["lo"] < 0 < c["hi"] else "resolved"
    f = f"{{:+.{digits}%}}"
    return f"median {f.format(c['median'])}, {word} ({f.format(c['lo'])} to {f.format(c['hi'])})"


def doctor_cost(rec: dict) -> list[dict]:
    """A doctor-cost record (benchmarks/doctor_cost.py --cuda) per workload and arm: the command's median
    step alone (`step_ms`), the doctor's cost against it per round ("median", "lo", "hi", "rounds"), the
    paired verdict, and the doctor's own report of its cost (median over rounds, `self`). Arm
    "doctor-noprofile": without the profiled steps that measure the GPU's busy share.
    Defined in notebook 00_first_launch."""
    out = []
    for config, c in rec["results"]["configs"].items():
        for name, a in c["arms"].items():
            arm = read(Arm, a, compare=lambda x: read(Compare, x))
            out.append({"config": config, "arm": name, "step_ms": arm.compare.a_median * 1e3,
                        "median": arm.median_cost, "lo": arm.cost_range[0], "hi": arm.cost_range[1],
                        "rounds": arm.compare.rounds, "verdict": arm.compare.verdict, "self": arm.self_reported})
    return out


def per_call(rec: dict) -> dict:
    """A timer-cost record's per-call costs (microseconds) and its median step (`step_us`).
    Defined in notebook 00_first_launch."""
    run = CostRun.of(rec)
    steps = sorted(r["builtin"]["s_per_step"] for r in run.rounds)
    return dict(run.micro, step_us=steps[len(steps) // 2] * 1e6)


def fr_kernels(rec: dict) -> dict:
    """The flight recorder's all-reduce durations against the profiler's kernel times, per message size:
    the median ratio and the share within 10%. Defined in notebook 00_first_launch."""
    row = next(r for r in validation_summary(rec) if r["check"] == "fr_kernels")
    return {"ratio_median": row["ratio_median"], "within_10pct": row["within_10pct"]}


def full_mode_cost(where) -> dict:
    """The recorded cost of the timer's mode "full" against DDP alone (`overhead-h200x1-small`), or the
    same run made live where `where` runs on NCCL (`course.replay`): per round and median.
    Defined in notebook 00_first_launch."""
    rec = replay.stored_or_live("overhead-h200x1-small", train.overhead_results, where, kind="overhead")
    t = rec["results"]["per_round"]
    rounds = sorted(f / o - 1 for f, o in zip(t["full"], t["off"], strict=True))
    return {"record": rec, "rounds": rounds, "median": rounds[len(rounds) // 2],
            "step_ms": statistics.median(t["off"]) * 1e3}
