"""One rank's totals from its timer result (seconds, bytes, counts): what the findings read.

The wall is the run's start to `result()`; the window is the part from the first step on (the
start-up before it is reported apart). DDP's timings sampled on a GPU (every k-th step) are scaled
to every step. Micro-steps are told from optimizer steps by the timer's `optimizer_steps` (torch's
optimizer hook), or, in results from before it saw them, by an "optimizer" phase.
"""

from __future__ import annotations

import statistics

# DDP's first steps (one bucket of every gradient, then the buckets rebuilt in ready order) are left
# out of the per-bucket reading: their order is not the run's.
WARMUP_STEPS = 2
COMPUTE = ("forward", "backward_compute", "optimizer")


def sampled_total(steps, key, every: int) -> float:
    """The sum of `key` over `steps`; where DDP's timings were sampled (`every` > 1), the steps
    without it get the mean of the sampled steps after DDP's first 10 (its warm-up, always sampled)."""
    have = [s[key] for s in steps if s.get(key) is not None]
    total = float(sum(have))
    if every <= 1 or not have or len(have) == len(steps):
        return total
    later = [s[key] for s in steps if s.get(key) is not None and s.get("step", 0) >= 10] or have
    return total + (len(steps) - len(have)) * sum(later) / len(later)


def compute(s) -> float:
    """A step's compute: its phases but the data wait, the communication in the backward, the script's own
    collectives and the timing hook's own time."""
    ph = s.get("phases") or {}
    other = sum(b - a for k, (a, b) in ph.items() if k not in ("forward", "backward", "optimizer"))
    return max(0.0, s.get("forward", 0.0) + s.get("backward_compute", s.get("backward", 0.0)) + s.get("optimizer", 0.0)
               + other - (s.get("collectives") or 0.0) - (s.get("hook_time") or 0.0))


def kinds(r) -> tuple[list, list, list]:
    """(optimizer steps, micro-steps that all-reduced, micro-steps that did not) of a `Rank`. Micro-steps
    after the last optimizer step (a run stopped or interrupted in the middle of one) are left out: they
    are not a whole optimizer step's."""
    steps = r.steps()
    if r.knows_optimizer_steps():
        last = max((i for i, s in enumerate(steps) if s.get("optimizer_steps")), default=len(steps) - 1)
        steps = steps[:last + 1]
        opt = [s for s in steps if s.get("optimizer_steps")]
        micro = [s for s in steps if not s.get("optimizer_steps") and (s.get("forwards") or s.get("phases"))]
    else:  # an older result: an optimizer phase marks the optimizer step, where the loop timed one
        opt = [s for s in steps if "optimizer" in s.get("phases", {})]
        micro = [s for s in steps if "optimizer" not in s.get("phases", {})] if opt else []
    synced = [s for s in micro if s.get("sync") or s.get("allreduce_calls")]
    quiet = [s for s in micro if not (s.get("sync") or s.get("allreduce_calls"))]
    return opt, synced, quiet


def launch_data(steps, starts, key) -> float:
    """The part of the data wait paid once per launch: the first pass's first step (loader workers
    starting) beyond what later passes' first steps wait (0 where they wait as long)."""
    starts = [i for i in starts or [] if i < len(steps)]
    if not starts:
        return 0.0
    firsts = [steps[i].get(key) or 0.0 for i in starts]
    others = firsts[1:] or [statistics.median(s.get(key) or 0.0 for s in steps)]
    return max(0.0, firsts[0] - statistics.median(others))


def buckets(steps) -> dict | None:
    """The buckets of the steps after warm-up that have them (mode "full"): per step their count, bytes,
    and per bucket its duration; the last-ready bucket's exposed seconds beyond every earlier bucket and
    the wait (no cap or order of the others changes them); None without buckets."""
    rows, durations, last_secs = [], [], 0.0
    for s in steps[WARMUP_STEPS:]:
        b = [x for x in s.get("buckets") or [] if "end" in x]
        if not b:
            continue
        last = max(b, key=lambda x: x["start"])
        others = [x for x in b if x is not last]
        before = max((x["end"] for x in others), default=last["start"])
        own = max(0.0, last["end"] - max(before, last["start"] + (s.get("wait") or 0.0)))
        last_secs += min(own, max(0.0, s.get("exposed", 0.0) - (s.get("wait") or 0.0)))
        gap = last["start"] - max((x["start"] for x in others), default=last["start"])
        rows.append((len(b), sum(x["bytes"] for x in b), last["bytes"], last["index"], gap))
        durations += [(x["bytes"], x["end"] - x["start"]) for x in b]
    if not rows:
        return None
    rows.sort()
    n, total, last_bytes, last_index, gap = rows[len(rows) // 2]
    return {"count": n, "bytes": total, "last_bytes": last_bytes, "last_index": last_index, "gap": gap,
            "last_seconds": last_secs, "durations": durations}


def measures(r) -> dict:
    """One `Rank`'s totals (seconds, bytes, counts)."""
    steps, acc = r.steps(), r.account
    every = int((r.timer.get("ddp_logging") or {}).get("sample_every") or 1)
    gpu = r.on_gpu and any("data_stall" in s for s in steps)
    data_key = "data_stall" if gpu else "data"   # on a GPU: what the device waited, not the host

    def per_step(key, among=steps):  # the median over the steps that have it (a sampled number is not 0 elsewhere)
        have = [s[key] for s in among if s.get(key) is not None]
        return statistics.median(have) if have else 0.0
    opt, synced, quiet = kinds(r)
    m = {"rank": r.rank, "steps": len(steps), "optimizer_steps": len(opt), "micro_synced": len(synced),
         "micro_quiet": len(quiet), "sampled_every": every, "device": r.device,
         "wait": sampled_total(steps, "wait", every), "exposed": sampled_total(steps, "exposed", every),
         "data": sum(s.get(data_key) or 0.0 for s in steps), "data_host": sum(s.get("data") or 0.0 for s in steps),
         "data_launch": launch_data(steps, r.timer.get("pass_starts"), data_key),
         # per step that all-reduced: a no_sync micro-step's 0 is not a quicker all-reduce
         "allreduce_step": per_step("allreduce", [s for s in steps if s.get("allreduce_calls") or s.get("allreduce")]),
         "step_time": per_step("step_time"),
         "compute_step": statistics.median(compute(s) for s in steps) if steps else 0.0,
         "compute": sum(compute(s) for s in steps),
         "calls": sum(s.get("allreduce_calls") or 0 for s in steps),
         "bytes": sum(s.get("allreduce_bytes") or 0 for s in steps),
         "has_exposed": any("exposed" in s for s in steps), "has_wait": any("wait" in s for s in steps),
         "collectives": sum(s.get("collectives") or 0.0 for s in steps),
         "collective_calls": sum(s.get("collective_calls") or 0 for s in steps),
         "hook_time": sum(s.get("hook_time") or 0.0 for s in steps),
         "induced": {}, "buckets": buckets([s for s in steps if id(s) not in {id(x) for x in synced}])}
    micro_wait = sampled_total(synced, "wait", every)
    micro_exposed = sampled_total(synced, "exposed", every) - micro_wait
    m["accumulation"] = max(0.0, micro_exposed) if opt and synced else 0.0
    # their whole all-reduce but the waits: what gloo's threads took from compute on shared cores
    m["accumulation_busy"] = max(0.0, sampled_total(synced, "allreduce", every) - micro_wait) if opt and synced else 0.0
    m["transfer"] = max(0.0, m["exposed"] - m["wait"] - m["accumulation"])
    if acc is None:
        m.update(wall=sum(s["step_time"] for s in steps), window=sum(s["step_time"] for s in steps),
                 outside={}, startup=None, untimed=None, after=0.0, account=False, parts={})
        return m
    startup = (acc.get("startup") or 0.0) + acc["before_first_step"]
    in_steps = acc["in_steps"]
    m.update(wall=acc["wall"] + (acc.get("startup") or 0.0), startup=startup,
             window=acc["wall"] - acc["before_first_step"], outside=dict(acc["outside"]),
             untimed=in_steps["remainder"] + acc["between_steps"], after=acc["after_last_step"],
             parts={**in_steps["phases"], "data": in_steps["data"], **acc["outside"]}, account=True)
    return m
