"""Each cause's finding, decided from the run's context: whether it fires, its seconds per rank,
the numbers that show it and what to change (`diagnosis.advice`). The thresholds are the constants
below; the comment at each says why it has its value.
"""

from __future__ import annotations

import statistics

from . import advice
from .causes import (ACCUMULATION, CAUSES, DATA, EXPOSED, HOST_BOUND, JITTER, LAST_BUCKET, LATENCY, OUTSIDE,
                     SMALL_BUCKETS, STARTUP, UNTIMED, WAITING)
from .report import MEASURED, SUSPECTED, Finding

# A cause is listed when it costs at least 3% of a rank's window (its time from the first step on) on
# the rank where it costs most: a rerun of the same run varies by a few % on a quiet machine, so a
# smaller cost could not be checked by measuring again after the change. The window, not the wall:
# start-up (reported apart) would otherwise hide a cause of a short run.
MIN_SHARE = 0.03
# 1 MiB per all-reduce call: below it a call's time is mostly its fixed cost (gloo on 2 CPU cores:
# 1 MB ~1.1 ms, 10 MB ~8 ms, so ~0.3 ms is fixed). Latency-bound: such calls AND compute per step
# below the all-reduce's time. Many small buckets: at least 6 per step, of at most 1 MiB each.
SMALL_MESSAGE = 1 << 20
MANY_BUCKETS = 6
# The last bucket is named when its own exposed time is at least half of the exposed transfer.
LAST_BUCKET_SHARE = 0.5
# A GPU busy under half of its traced steps is waiting for the host; where only the timer's host and
# device spans are known, a host that took 90% of the device's time to issue the work suspects it.
BUSY_HOST_BOUND = 0.5
HOST_PACED = 0.9


def _fmt(per) -> str:
    return ", ".join("-" if x is None else f"{x:.3g}" for x in per)


def make(cause, what, per, ms, detail, change, status="measured", needs_code=False, floor=True, knob=None):
    """A Finding at the rank where `per` is largest; None under MIN_SHARE of that rank's window."""
    vals = [x or 0.0 for x in per]
    i = max(range(len(ms)), key=vals.__getitem__)
    m, secs = ms[i], vals[i]
    window_share = secs / m["window"] if m["window"] > 0 else 0.0
    if floor and window_share < MIN_SHARE:
        return None
    return Finding(cause, what, secs, secs / m["wall"] if m["wall"] > 0 else 0.0, list(vals), detail, change,
                   CAUSES[cause][1], status, window_share, m["rank"], needs_code, knob)


def outside(ms, att, world) -> list:
    out = []
    for name in dict.fromkeys(n for m in ms for n in m["outside"]):
        own = [m["outside"].get(name, 0.0) for m in ms]
        waited = [a["charged"].get(("outside", name), 0.0) for a in att["ranks"]] if world > 1 else [0.0] * len(ms)
        detail = f"{name!r} s per rank: {_fmt(own)}"
        if any(waited):
            detail += f"; the others' waits for it, s per rank: {_fmt(waited)} (counted here, not as waiting)"
        change, code = advice.outside(world, own, waited)
        out.append(make(OUTSIDE, name, [a + b for a, b in zip(own, waited, strict=True)], ms, detail, change,
                        needs_code=code))
    return out


def waiting(ms, att, setting) -> list:
    """Imbalance (one rank late by a margin) and jitter; jitter on shared cores is a note, not a finding."""
    out = []
    if att["slower"] is not None:
        per = [a["imbalance"] for a in att["ranks"]]
        gap = ", ".join(f"{k} {v * 1e3:+.3g} ms" for k, v in att["gap"].items() if abs(v) > 0)
        detail = (f"rank {att['slower']} was the late one at {att['late_share']:.0%} of {len(att['late'])} "
                  "all-reduces; "
                  f"its median per step against the others': {gap}; waited s per rank: {_fmt(per)}")
        out.append(make(WAITING, "", per, ms, detail, advice.imbalance(att["slower"], att["gap"])))
    if not setting.shared:
        per = [a["jitter"] for a in att["ranks"]]
        detail = f"the late rank changed from step to step; waited s per rank: {_fmt(per)}"
        out.append(make(JITTER, "", per, ms, detail, advice.jitter(False)))
    return out


def threads_knob(setting) -> dict | None:
    """Ranks sharing cores with more than one thread each: the threads that divide the cores among them."""
    if not setting.shared or not setting.hosts or setting.gpu:
        return None
    n = max(1, min(h.cores // max(1, h.ranks) for h in setting.hosts))
    return {"threads": n} if any(h.threads > n * h.ranks for h in setting.hosts) else None


def data(ms, att, setting, run) -> object:
    own = [m["data"] for m in ms]
    waited = [a["charged"].get(("data",), 0.0) for a in att["ranks"]]
    detail = "waiting for batches inside the steps, s per rank: " + _fmt(own)
    if run[0].on_gpu and any(m["data"] != m["data_host"] for m in ms):
        detail += " (what the GPU waited: each step's start to its first phase)"
    if any(waited):
        detail += f"; the others' waits for it: {_fmt(waited)}"
    loader = run[0].loader
    if loader:
        detail += f"; loader: num_workers={loader['num_workers']}, persistent_workers={loader['persistent_workers']}"
    else:
        detail += "; the loader's settings are not in this result (no DataLoader was read: its workers are unknown)"
    spare = setting.spare or 0
    workers = max(1, spare // max(1, setting.world)) if spare > 0 else 1
    knob = ({"loader": {"num_workers": workers, "persistent_workers": True}} if not (loader or {}).get("num_workers")
            else {"loader": {"pin_memory": True}} if setting.gpu and not loader.get("pin_memory") else None)
    return make(DATA, "", [a + b for a, b in zip(own, waited, strict=True)], ms, detail,
                advice.data(setting, loader, setting.gpu), knob=knob)


def untimed(ms, att) -> object:
    if any(m["untimed"] is None for m in ms):
        return None
    own = [m["untimed"] for m in ms]
    waited = [a["charged"].get(("untimed",), 0.0) for a in att["ranks"]]
    detail = f"time in and between steps no phase covers, s per rank: {_fmt(own)}"
    if any(waited):
        detail += f"; the others' waits for it: {_fmt(waited)}"
    return make(UNTIMED, "", [a + b for a, b in zip(own, waited, strict=True)], ms, detail, advice.FIXED["untimed"])


def accumulation(ms, setting, notes: list) -> object:
    """Micro-steps that all-reduced before their optimizer step. Their cost: the exposed all-reduce after
    every rank was ready (measured); on shared cores, where the overlapped part takes cycles from the
    compute, their whole all-reduce but the waits where larger (suspected). Named below the floor too, as
    a note: a detected misconfiguration is never passed over in silence."""
    exposed = [m["accumulation"] for m in ms]
    busy = [m["accumulation_busy"] if setting.shared else 0.0 for m in ms]
    per = [max(a, b) for a, b in zip(exposed, busy, strict=True)]
    m = ms[max(range(len(ms)), key=per.__getitem__)]
    if not m["optimizer_steps"] or not m["micro_synced"]:
        return None
    n = (m["micro_synced"] + m["optimizer_steps"]) / m["optimizer_steps"]
    detail = (f"{m['micro_synced']} micro-steps all-reduced without an optimizer step after them: {n:.3g} "
              f"all-reduces per optimizer step where one would do; their exposed all-reduce, s per rank: "
              f"{_fmt(exposed)}" + (f"; their whole all-reduce but the waits (shared cores): {_fmt(busy)}"
                                    if setting.shared else ""))
    status = MEASURED if max(exposed) >= max(busy) else SUSPECTED
    f = make(ACCUMULATION, "", per, ms, detail, advice.FIXED["accumulation"], status=status, needs_code=True)
    if f is None:
        notes.append(f"gradient accumulation without no_sync: {n:.3g} all-reduces per optimizer step where one "
                     f"would do, {max(per):.3g} s (under 3% of the window): {advice.FIXED['accumulation']}")
    return f


def latency_bound(m) -> bool:
    per_call = m["bytes"] / m["calls"] if m["calls"] else 0.0
    return per_call <= SMALL_MESSAGE and m["allreduce_step"] >= m["compute_step"]


def transfer(ms, run, setting) -> list:
    """The exposed transfer after every rank was ready: the last bucket's part, then the rest."""
    out, lasts = [], []
    for m in ms:
        b = m["buckets"]
        own = 0.0
        if b and b["count"] >= 2 and m["transfer"] and b["last_seconds"] >= LAST_BUCKET_SHARE * m["transfer"] \
                and not latency_bound(m):
            own = min(b["last_seconds"], m["transfer"])
        lasts.append(own)
        m["transfer"] -= own
    if any(lasts):
        i = max(range(len(ms)), key=lasts.__getitem__)
        b, model = ms[i]["buckets"], run[i].model
        rows = model.get("bucket_tensors") or []
        tensors = rows[b["last_index"]] if 0 <= b["last_index"] < len(rows) else None
        detail = (f"it holds {b['last_bytes'] / 2**20:.3g} of the {b['bytes'] / 2**20:.3g} MiB in {b['count']} "
                  f"buckets and is ready last, {b['gap'] * 1e3:.3g} ms after the one before it, every earlier "
                  f"bucket already sent; its exposed time, s per rank: {_fmt(lasts)}")
        cap = advice.split_cap(tensors, b["last_bytes"]) if not setting.shared else None
        knob: dict | None = ({"ddp": {"bucket_cap_mb": cap}} if cap else
                             {"hook": "bf16"} if setting.backend == "nccl" else None)
        change = advice.last_bucket(tensors, b["last_bytes"], setting.shared, ms[i]["micro_quiet"] > 0)
        out.append(make(LAST_BUCKET, "", lasts, ms, detail, change, knob=knob))
    per = [m["transfer"] for m in ms]
    m = ms[max(range(len(ms)), key=per.__getitem__)]
    small = latency_bound(m)
    per_call = m["bytes"] / m["calls"] if m["calls"] else 0.0
    detail = (f"exposed after every rank was ready, s per rank: {_fmt(per)}; per step: all-reduce "
              f"{m['allreduce_step'] * 1e3:.3g} ms, compute {m['compute_step'] * 1e3:.3g} ms, "
              f"{per_call / 1024:.4g} KiB per call")
    model = run[0].model
    cap = model.get("bucket_cap_bytes")
    split = advice.split_one(model.get("grad_bytes")) if not setting.shared else None
    one = bool(m["buckets"] and m["buckets"]["count"] == 1 and cap and split)
    change = (advice.FIXED["latency"] if small else
              advice.exposed(m["buckets"], cap, model.get("grad_bytes"), setting.shared, m["micro_quiet"] > 0))
    knob = ({"ddp": {"bucket_cap_mb": 25}} if small and cap and cap < advice.DEFAULT_CAP else
            {"ddp": {"bucket_cap_mb": split}} if one and not small else
            {"hook": "bf16"} if setting.backend == "nccl" and not small else None)
    out.append(make(LATENCY if small else EXPOSED, "", per, ms, detail, change, knob=knob))
    return out


def small_buckets(ms, run, setting) -> object:
    """Many small buckets: each pays the all-reduce's fixed cost; on shared cores the overlapped calls
    take cycles from the backward, so the cost shows as a slower backward, not as exposed time. Its
    seconds: the extra calls' share of the transfer exposed after every rank was ready (measured; the
    rest stays the exposed all-reduce's) or, where larger, an estimate of their fixed cost (suspected):
    the link's fitted latency where known, else the smallest bucket's quickest calls (its bytes
    included: an upper bound; a median call also holds the waits for the backward it overlaps)."""
    m = max(ms, key=lambda x: x["buckets"]["count"] if x["buckets"] else 0)
    b = m["buckets"]
    if not b or b["count"] < MANY_BUCKETS or b["bytes"] / b["count"] > SMALL_MESSAGE:
        return None
    least = min((n for n, _ in b["durations"]), default=None)
    small = sorted(d for n, d in b["durations"] if n == least and n <= SMALL_MESSAGE)
    per_call = setting.per_call or (small[len(small) // 10] if small else None)
    model = run[0].model
    extra = b["count"] - (int(b["bytes"] // advice.DEFAULT_CAP) + 2)
    syncs = m["steps"] - m["micro_quiet"]
    est = max(0.0, extra * per_call * syncs) if per_call is not None else None
    # merging sends the same bytes in fewer calls: of the exposed transfer, the extra calls' share is
    # charged here (each call costing alike), the rest stays the exposed all-reduce's
    share = max(0, extra) / b["count"]
    exposed = [x["transfer"] * share for x in ms]
    for x, e in zip(ms, exposed, strict=True):
        x["transfer"] -= e
    source = ("the all-reduce fit" if setting.per_call else
              f"the quickest tenth of this run's smallest bucket ({(least or 0) / 1024:.3g} KiB), bytes and all")
    cost = (f"every extra call's fixed cost about {est:.3g} s ({extra} extra calls a step x {per_call * 1e3:.3g} "
            f"ms, {source}, over {syncs} steps)" if est is not None and per_call is not None
            else "the cost per call is unknown")
    detail = (f"{b['count']} buckets a step, {b['bytes'] / b['count'] / 1024:.3g} KiB each (median); the extra "
              f"calls' share ({max(0, extra)} of {b['count']}) of the all-reduce exposed after every rank was ready, "
              f"s per rank: {_fmt(exposed)}; {cost}")
    change = advice.small_buckets(model.get("bucket_cap_bytes"), b["count"], b["bytes"] / b["count"], b["bytes"])
    per = [max(e, est or 0.0) for e in exposed]
    status = MEASURED if est is None or max(exposed) >= est else SUSPECTED
    return make(SMALL_BUCKETS, "", per, ms, detail, change, status=status, knob={"ddp": {"bucket_cap_mb": 25}})


def host_bound(ms, run) -> tuple[object, str | None]:
    """(finding, undecided line) for GPU steps: from the run's profiler trace, else host against device spans."""
    if not run[0].on_gpu:
        return None, None
    busy = run.gpu_busy()
    if busy:
        frac = statistics.median(b["busy"] for b in busy)
        if frac >= BUSY_HOST_BOUND:
            return None, None
        per = [(1 - frac) * sum(s["step_time"] for s in r.steps()) for r in run]
        detail = (f"the GPU was busy {frac:.0%} of {len(busy)} traced steps of this setup (kernels, copies and sets "
                  "in a profiler trace of rank 0; a record's trace is a launch of its own, not these rounds): the "
                  "phase times here are CUDA-event spans paced by the host, not GPU work")
        return make(HOST_BOUND, "", per, ms, detail, advice.FIXED["host_bound"]), None
    paced = []
    for r in run:
        host = [s for s in r.steps()[2:] if s.get("host")]
        dev = sum(s.get("forward", 0) + s.get("backward", 0) for s in host)
        hst = sum(s["host"].get("forward", 0) + s["host"].get("backward", 0) for s in host)
        paced.append(hst / dev if dev else None)
    if any(p is not None for p in paced):
        if max(p or 0 for p in paced) < HOST_PACED:
            return None, None
        per = [m["compute"] for m in ms]
        detail = (f"the host took {max(p or 0 for p in paced):.0%} of the device's time to issue forward and "
                  "backward: the GPU keeps up with the host, so it likely waits for it (a profiler window decides)")
        return make(HOST_BOUND, "", per, ms, detail, advice.FIXED["host_bound"], status=SUSPECTED), None
    return None, ("host-bound GPU steps: CUDA-event marks cannot tell an idle GPU from a busy one; a short "
                  "torch.profiler window (or this version's timer, which keeps the host's spans too) decides")


def startup(ms) -> Finding | None:
    if any(m["startup"] is None for m in ms):
        return None
    per = [m["startup"] for m in ms]
    i = max(range(len(ms)), key=per.__getitem__)
    return Finding(STARTUP, "", per[i], per[i] / ms[i]["wall"] if ms[i]["wall"] else 0.0, per,
                   f"the run's start (the process's, or the timer's run_start) to the first step, s per rank: "
                   f"{_fmt(per)}", advice.FIXED["startup"], CAUSES[STARTUP][1], rank=ms[i]["rank"])
