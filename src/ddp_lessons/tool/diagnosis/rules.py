"""The rules of `diagnose`: per-rank measures from the timer's results (`measures`), and
the finding each cause gives (`all_findings`). The thresholds are the constants below; the
comment at each says why it has its value.
"""

from __future__ import annotations

import statistics

from .causes import ACCUMULATION, DATA, EXPOSED, HOST, LAST_BUCKET, LATENCY, OUTSIDE, STARTUP, WAITING

# A cause is listed when it costs at least 3% of a rank's wall time on the rank where it costs most.
# The timer's own accounting error is well under 1% (the parts add up to the wall by construction;
# its marks cost microseconds), but a rerun of the same run varies by a few % on a quiet machine
# (more on a shared one): a smaller cost could not be checked by measuring again after the change.
MIN_SHARE = 0.03
# 1 MiB per all-reduce call: below it an all-reduce's time is mostly its fixed per-call cost. Measured
# on 2 CPU cores with gloo: 1 MB took ~1.1 ms and 10 MB ~8 ms (~1.3 GB/s), so ~0.3 ms of the 1 MB call
# is fixed cost and a smaller call is dominated by it; NCCL's fixed cost is tens of us against far higher
# bandwidth, so 1 MiB is on the safe side there too. An exposed all-reduce is called latency-bound when
# its messages are that small AND the step's compute (forward + backward compute + optimizer) is less
# than its all-reduce time: no bucketing can hide it.
SMALL_MESSAGE = 1 << 20
# Outside work is "on every rank" when the largest rank's seconds are at most 1.5x the smallest's (the
# same work done N times, as duplicated evaluation is); otherwise it is uneven and the others wait.
EVEN = 1.5
# A GPU step shorter than 5 ms may be bound by the host launching kernels (case 2: 1.65 ms plain on an
# H200 against 0.21 ms for the same step as one CUDA graph); CUDA-event marks cannot tell, so it is
# reported as undecided.
SHORT_GPU_STEP = 5e-3
# Waits are undecided when the common clock's error is more than 10% of the largest rank's total wait.
CLOCK_TRUST = 0.10
# The last bucket is named when its own exposed time is at least half of the exposed transfer: then
# the rest of the buckets overlapped the backward and a smaller cap leaves the last one as it is.
LAST_BUCKET_SHARE = 0.5
# DDP's first steps (one bucket of every gradient, then the buckets rebuilt in ready order) are left
# out of the per-bucket reading: their order is not the run's.
WARMUP_STEPS = 2


def _sampled_total(steps, key, every: int) -> float:
    """The sum of `key` over `steps`; where DDP's timings were sampled (`every` > 1), the steps
    without it get the mean of the sampled steps after DDP's first 10 (its warm-up, always sampled)."""
    have = [s[key] for s in steps if s.get(key) is not None]
    total = float(sum(have))
    if every <= 1 or not have or len(have) == len(steps):
        return total
    later = [s[key] for s in steps if s.get(key) is not None and s.get("step", 0) >= 10] or have
    return total + (len(steps) - len(have)) * sum(later) / len(later)


def _launch_data(r, key) -> float:
    """The part of the data wait paid once per launch: the first pass's first step (loader workers
    starting) beyond what later passes' first steps wait (0 where they wait as long: workers started
    again every epoch). Needs the timer's `pass_starts`; 0 without them."""
    steps, starts = r["steps"], [i for i in r.get("pass_starts") or [] if i < len(r["steps"])]
    if not starts:
        return 0.0
    firsts = [steps[i].get(key) or 0.0 for i in starts]
    others = firsts[1:] or [statistics.median(s.get(key) or 0.0 for s in steps)]
    return max(0.0, firsts[0] - statistics.median(others))


def last_bucket(steps) -> dict | None:
    """Per-bucket reading (mode "full"): the exposed seconds of the bucket ready last, beyond the
    wait and after every earlier bucket was done (so no cap or order of the others would change it),
    its share of the bytes and how long after the one before it it became ready. None without buckets."""
    secs, rows = 0.0, []
    for s in steps[WARMUP_STEPS:]:
        b = s.get("buckets") or []
        if len(b) < 1 or "end" not in b[0]:
            continue
        last = max(b, key=lambda x: x["start"])
        others = [x for x in b if x is not last]
        before = max((x["end"] for x in others), default=last["start"])
        # from the later of: every earlier bucket sent, every rank ready (this one's ready time + its wait)
        own = max(0.0, last["end"] - max(before, last["start"] + (s.get("wait") or 0.0)))
        transfer = max(0.0, s.get("exposed", 0.0) - (s.get("wait") or 0.0))
        secs += min(own, transfer)
        gap = last["start"] - max((x["start"] for x in others), default=last["start"])
        rows.append((last["bytes"], sum(x["bytes"] for x in b), len(b), gap))
    if not rows:
        return None
    rows.sort()
    mid = rows[len(rows) // 2]
    return {"seconds": secs, "bytes": mid[0], "total_bytes": mid[1], "buckets": mid[2], "gap": mid[3]}


def measures(r: dict) -> dict:
    """One rank's totals (seconds) from its timer result."""
    steps, acc = r["steps"], r.get("account")
    tot = lambda key: sum(s.get(key, 0.0) or 0.0 for s in steps)  # noqa: E731
    every = int((r.get("ddp_logging") or {}).get("sample_every") or 1)
    def per_step(key):  # the median over the steps that have it (a sampled number is not 0 elsewhere)
        have = [s[key] for s in steps if s.get(key) is not None]
        return statistics.median(have) if have else 0.0
    compute = [s.get("forward", 0.0) + s.get("backward_compute", s.get("backward", 0.0)) + s.get("optimizer", 0.0)
               for s in steps]
    # on a GPU the data wait that counts is what the device saw (`data_stall`), not the host's wait
    gpu = str(r.get("device", "")).startswith("cuda") and any("data_stall" in s for s in steps)
    m = {"rank": r.get("rank", 0), "wait": _sampled_total(steps, "wait", every),
         "exposed": _sampled_total(steps, "exposed", every), "data": tot("data_stall" if gpu else "data"),
         "data_host": tot("data"), "threads": r.get("threads"), "cores": r.get("cores"), "hostname": r.get("host"),
         "has_exposed": any("exposed" in s for s in steps), "sampled_every": every,
         "data_launch": _launch_data(r, "data_stall" if gpu else "data"),
         "allreduce_step": per_step("allreduce"), "step_time": per_step("step_time"),
         "compute_step": statistics.median(compute) if compute else 0.0,
         "calls": tot("allreduce_calls"), "bytes": tot("allreduce_bytes"),
         "has_wait": any("wait" in s for s in steps), "steps": len(steps)}
    # Gradient accumulation without no_sync: micro-steps (no optimizer phase) that all-reduced anyway.
    # Known only where the loop times an optimizer phase; their exposed time is charged here, once.
    timed_opt = [s for s in steps if "optimizer" in s.get("phases", {})]
    micro = [s for s in steps if "optimizer" not in s.get("phases", {}) and s.get("allreduce_calls")]
    m["optimizer_steps"], m["micro_allreduce_steps"] = len(timed_opt), len(micro)
    m["accumulation"] = (max(0.0, _sampled_total(micro, "exposed", every) - _sampled_total(micro, "wait", every))
                         if timed_opt and micro else 0.0)
    micro_ids = {id(s) for s in micro}
    lb = last_bucket([s for s in steps if id(s) not in micro_ids])
    m["last_bucket_numbers"] = lb
    m["transfer"] = max(0.0, m["exposed"] - m["wait"] - m["accumulation"])
    # charged to the last bucket only where it is most of the transfer, of several buckets (one bucket
    # is no overlap at all), and the all-reduce is not latency-bound (that finding says more); never twice
    m["last_bucket"] = 0.0
    if lb and lb["buckets"] >= 2 and m["transfer"] and lb["seconds"] >= LAST_BUCKET_SHARE * m["transfer"] \
            and not _latency_bound(m):
        m["last_bucket"] = min(lb["seconds"], m["transfer"])
    m["transfer"] -= m["last_bucket"]
    if acc is None:
        m.update(wall=tot("step_time"), outside={}, startup=None, host=None, after=0.0, account=False)
        return m
    in_steps = acc["in_steps"]
    m.update(wall=acc["wall"] + (acc.get("startup") or 0.0), outside=dict(acc["outside"]),
             startup=(acc.get("startup") or 0.0) + acc["before_first_step"],
             host=in_steps["remainder"] + acc["between_steps"], after=acc["after_last_step"],
             parts={**in_steps["phases"], "data": in_steps["data"], **acc["outside"]},
             account=True)
    return m


def charge_peer_waits(ranks, ms) -> None:
    """Charge each second once: a rank's wait inside a step that overlaps a peer's outside work
    (rank 0 evaluating while rank 1 waits at the next all-reduce) moves from that rank's `wait` to
    `induced[name]`, so the outside finding carries it and the waiting finding does not. Steps and
    outside intervals are on the common clock (`timing.sync`)."""
    if len(ranks) < 2:
        return
    for r, (res, m) in enumerate(zip(ranks, ms, strict=True)):
        peers = [iv for q, other in enumerate(ranks) if q != r for iv in other.get("outside") or []]
        induced = {}
        for s in res["steps"]:
            w = s.get("wait") or 0.0
            if w <= 0 or "t_start" not in s:
                continue
            a, b = s["t_start"], s["t_start"] + s["step_time"]
            overlap = {}  # per name, the largest overlap of one of its intervals with this step
            for iv in peers:
                overlap[iv["name"]] = max(overlap.get(iv["name"], 0.0), min(b, iv["end"]) - max(a, iv["start"]))
            name = max(overlap, key=overlap.get, default=None)
            if name is not None and overlap[name] > 0:
                charged = min(w, overlap[name])
                induced[name] = induced.get(name, 0.0) + charged
        m["induced"] = induced
        m["wait"] = max(0.0, m["wait"] - sum(induced.values()))


def _worst(ms, key):
    """(seconds, share, per-rank list) of `key`, at the rank where it costs most."""
    per = [m[key] or 0.0 for m in ms]
    i = max(range(len(ms)), key=lambda k: per[k])
    return per[i], per[i] / ms[i]["wall"] if ms[i]["wall"] > 0 else 0.0, per


def _fmt_ranks(per) -> str:
    return ", ".join(f"{x:.3g}" for x in per)


def outside_findings(ms, world) -> list:
    out = []
    for name in dict.fromkeys(n for m in ms for n in m["outside"]):
        own = [m["outside"].get(name, 0.0) for m in ms]
        waited = [m.get("induced", {}).get(name, 0.0) for m in ms]
        per = [a + b for a, b in zip(own, waited, strict=True)]  # its own seconds, and the peers' waits for it
        i = max(range(len(ms)), key=lambda k: per[k])
        share = per[i] / ms[i]["wall"] if ms[i]["wall"] else 0.0
        if share < MIN_SHARE:
            continue
        even = min(own) > 0 and max(own) <= EVEN * min(own)
        if world <= 1 or len(per) == 1:  # nobody to wait for it, and nothing to share it with
            how = f"{per[i]:.3g} s on the only rank: it adds to the run's time as it is"
        elif even:
            how = (f"on every rank ({min(own):.3g} .. {max(own):.3g} s): if each rank does the whole of it, "
                   f"it is done {world} times")
        else:
            how = f"uneven across ranks (s per rank: {_fmt_ranks(own)}): the others wait for it"
        if any(waited):
            how += f"; the others' waits for it, s per rank: {_fmt_ranks(waited)} (counted here, not as waiting)"
        out.append((OUTSIDE, name, per[i], share, per, f"{name!r} {how}"))
    return out


def wait_finding(ms):
    secs, share, per = _worst(ms, "wait")
    if share < MIN_SHARE:
        return None
    slow = min(range(len(ms)), key=lambda k: per[k])
    detail = f"rank {ms[slow]['rank']} is the slowest (it waits least); waited s per rank: {_fmt_ranks(per)}"
    waiter = max(range(len(ms)), key=lambda k: per[k])
    parts_s, parts_w = ms[slow].get("parts", {}), ms[waiter].get("parts", {})
    diffs = {k: parts_s.get(k, 0.0) - parts_w.get(k, 0.0) for k in set(parts_s) | set(parts_w)}
    if diffs and max(diffs.values()) > 0:
        k = max(diffs, key=diffs.get)
        detail += f"; it spends {diffs[k]:.3g} s more in {k!r} than rank {ms[waiter]['rank']}"
    return (WAITING, "", secs, share, per, detail)


def _latency_bound(m) -> bool:
    per_call = m["bytes"] / m["calls"] if m["calls"] else 0.0
    return per_call <= SMALL_MESSAGE and m["allreduce_step"] >= m["compute_step"]


def comm_finding(ms):
    secs, share, per = _worst(ms, "transfer")
    if share < MIN_SHARE:
        return None
    m = ms[per.index(secs)]
    per_call = m["bytes"] / m["calls"] if m["calls"] else 0.0
    small = _latency_bound(m)
    detail = (f"exposed after every rank was ready, s per rank: {_fmt_ranks(per)}; per step: all-reduce "
              f"{m['allreduce_step'] * 1e3:.3g} ms, compute {m['compute_step'] * 1e3:.3g} ms, "
              f"{per_call / 1024:.4g} KiB per call")
    return (LATENCY if small else EXPOSED, "", secs, share, per, detail)


def last_bucket_finding(ms):
    secs, share, per = _worst(ms, "last_bucket")
    if share < MIN_SHARE:
        return None
    lb = ms[per.index(secs)]["last_bucket_numbers"]
    detail = (f"it holds {lb['bytes'] / 2**20:.3g} of the {lb['total_bytes'] / 2**20:.3g} MiB in {lb['buckets']} "
              f"bucket(s) and becomes ready last, {lb['gap'] * 1e3:.3g} ms after the one before it, with every "
              f"earlier bucket already sent; its exposed time, s per rank: {_fmt_ranks(per)}")
    return (LAST_BUCKET, "", secs, share, per, detail)


def accumulation_finding(ms):
    secs, share, per = _worst(ms, "accumulation")
    if share < MIN_SHARE:
        return None
    m = ms[per.index(secs)]
    n_ar = m["micro_allreduce_steps"] + m["optimizer_steps"]
    detail = (f"{m['micro_allreduce_steps']} micro-steps all-reduced without an optimizer step after them: "
              f"{n_ar / m['optimizer_steps']:.3g} all-reduces per optimizer step where one would do; their "
              f"exposed all-reduce, s per rank: {_fmt_ranks(per)}")
    return (ACCUMULATION, "", secs, share, per, detail)


def simple_finding(ms, key, cause, what):
    if any(m[key] is None for m in ms):
        return None
    secs, share, per = _worst(ms, key)
    if share < MIN_SHARE:
        return None
    return (cause, "", secs, share, per, f"{what}, s per rank: {_fmt_ranks(per)}")


def all_findings(ms, world) -> list:
    found = outside_findings(ms, world) + [
        wait_finding(ms), comm_finding(ms), accumulation_finding(ms), last_bucket_finding(ms),
        simple_finding(ms, "data", DATA, "waiting for batches inside the steps"
                       + (" (what the GPU waited: each step's start to its first phase)"
                          if any(m["data"] != m["data_host"] for m in ms) else "")),
        simple_finding(ms, "host", HOST, "untimed host work in and between steps (step remainder + gaps)"),
        simple_finding(ms, "startup", STARTUP,
                       "the run's start (the process's, or the timer's run_start) to the first step")]
    return sorted((f for f in found if f is not None), key=lambda f: -f[2])
