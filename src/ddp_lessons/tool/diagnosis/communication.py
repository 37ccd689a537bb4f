"""The findings about communication: the exposed all-reduce after every rank was ready (the last bucket's
part, many small buckets, latency against contention), all-reduces of micro-steps that did not need them,
and the collectives the script issues itself. Each reads the run's setting (`diagnosis.setting`) and
writes its advice with `diagnosis.advice`.
"""

from __future__ import annotations

from . import advice
from .causes import ACCUMULATION, COLLECTIVES, EXPOSED, LAST_BUCKET, LATENCY, SMALL_BUCKETS
from .findings import LAST_BUCKET_SHARE, MANY_BUCKETS, SMALL_MESSAGE, _fmt, make
from .report import MEASURED, SUSPECTED

# Latency-bound only where a call in training takes near the all-reduce's fixed cost: at 3 times it or more
# the calls wait for something else (peers, cores taken by other threads), which is contention, not latency.
CONTENDED = 3.0


def accumulation(ms, setting, notes: list) -> object:
    """Micro-steps that all-reduced before their optimizer step. Their cost: the exposed all-reduce after
    every rank was ready (measured); on shared cores, where the overlapped part takes cycles from the
    compute, their whole all-reduce but the waits where larger (suspected). Named below the floor too, as
    a note: a detected misconfiguration is never passed over in silence."""
    exposed = [m.accumulation for m in ms]
    busy = [m.accumulation_busy if setting.shared else 0.0 for m in ms]
    per = [max(a, b) for a, b in zip(exposed, busy, strict=True)]
    m = ms[max(range(len(ms)), key=per.__getitem__)]
    if not m.optimizer_steps or not m.micro_synced:
        return None
    n = (m.micro_synced + m.optimizer_steps) / m.optimizer_steps
    detail = (f"{m.micro_synced} micro-steps all-reduced without an optimizer step after them: {n:.3g} "
              f"all-reduces per optimizer step where one would do; their exposed all-reduce, s per rank: "
              f"{_fmt(exposed)}" + (f"; their whole all-reduce but the waits (shared cores): {_fmt(busy)}"
                                    if setting.shared else ""))
    status = MEASURED if max(exposed) >= max(busy) else SUSPECTED
    fix = advice.FIXED["accumulation"]
    f = make(ACCUMULATION, "", per, ms, detail, fix, status=status, needs_code=True)
    if f is None:
        notes.append(f"gradient accumulation without no_sync: {n:.3g} all-reduces per optimizer step where one "
                     f"would do, {max(per):.3g} s (under 3% of the window): {fix}")
    return f


def fixed_cost(m, setting) -> float | None:
    """An all-reduce call's fixed cost: the link's fitted latency where known, else the quickest tenth of
    this run's smallest bucket's calls (mode "full"; its bytes included: an upper bound)."""
    if setting.per_call:
        return setting.per_call
    b = m.buckets
    if not b or not b.durations:
        return None
    least = min(n for n, _ in b.durations)
    small = sorted(d for n, d in b.durations if n == least)
    return small[len(small) // 10] if small else None


def latency_bound(m, setting=None) -> bool:
    """Small calls (<= 1 MiB) that take as long as the step's compute, each near the fixed cost."""
    per_call = m.bytes / m.calls if m.calls else 0.0
    if not (per_call <= SMALL_MESSAGE and m.allreduce_step >= m.compute_step):
        return False
    return not contended(m, setting)


def contended(m, setting) -> bool:
    """The calls take CONTENDED times their fixed cost or more in training."""
    fixed = fixed_cost(m, setting) if setting is not None else None
    syncs = max(1, m.steps - m.micro_quiet)
    calls = m.calls / syncs if m.calls else 0
    return bool(fixed and calls and m.allreduce_step / calls >= CONTENDED * fixed)


def transfer(ms, run, setting, taken=None) -> list:
    """The exposed transfer after every rank was ready, but what `taken` (s per rank) already charged to
    another finding: the last bucket's part, then the rest."""
    out, lasts, left = [], [], []
    for m, t in zip(ms, taken or [0.0] * len(ms), strict=True):
        b, rest = m.buckets, m.transfer - t
        own = 0.0
        if b and b.count >= 2 and rest and b.last_seconds >= LAST_BUCKET_SHARE * rest \
                and not latency_bound(m, setting):
            own = min(b.last_seconds, rest)
        lasts.append(own)
        left.append(rest - own)
    if any(lasts):
        out.append(_last_bucket(ms, run, setting, lasts))
    per = left
    m = ms[max(range(len(ms)), key=per.__getitem__)]
    small = latency_bound(m, setting)
    busy = contended(m, setting)
    per_call = m.bytes / m.calls if m.calls else 0.0
    busy_text = (f"all-reduce {m.allreduce_step * 1e3:.3g} ms" if m.allreduce_step else
                 "the all-reduce's own time not timed (DDP's C++ all-reduce: its exposed part is)")
    detail = (f"exposed after every rank was ready, s per rank: {_fmt(per)}; per step: {busy_text}, compute "
              f"{m.compute_step * 1e3:.3g} ms, {per_call / 1024:.4g} KiB per call")
    model = run[0].model
    cap = model.get("bucket_cap_bytes")
    split = advice.split_one(model.get("grad_bytes")) if not setting.shared else None
    one = bool(m.buckets and m.buckets.count == 1 and cap and split)
    accumulating = m.micro_quiet > 0
    fixed = fixed_cost(m, setting)
    if busy and fixed:
        detail += (f"; a call takes {CONTENDED:g}x or more its fixed cost here "
                   f"({fixed * 1e3:.3g} ms): the calls wait for something else (contention)")
    change = (advice.latency(accumulating) if small else
              advice.contention(setting) if busy else
              advice.exposed(m.buckets, cap, model.get("grad_bytes"), setting.shared, accumulating))
    knob = ({"ddp": {"bucket_cap_mb": 25}} if small and cap and cap < advice.DEFAULT_CAP else
            {"ddp": {"bucket_cap_mb": split}} if one and not small else
            {"hook": "bf16"} if setting.backend == "nccl" and not small else None)
    out.append(make(LATENCY if small else EXPOSED, "", per, ms, detail, change, knob=knob))
    return out


def _last_bucket(ms, run, setting, lasts) -> object:
    """The last bucket's own exposed time, `lasts` s per rank."""
    i = max(range(len(ms)), key=lasts.__getitem__)
    b, model = ms[i].buckets, run[i].model
    rows = model.get("bucket_tensors") or []
    tensors = rows[b.last_index] if 0 <= b.last_index < len(rows) else None
    detail = (f"it holds {b.last_bytes / 2**20:.3g} of the {b.bytes / 2**20:.3g} MiB in {b.count} "
              f"buckets and is ready last, {b.gap * 1e3:.3g} ms after the one before it, every earlier "
              f"bucket already sent; its exposed time, s per rank: {_fmt(lasts)}")
    cap = advice.split_cap(tensors, b.last_bytes) if not setting.shared else None
    knob: dict | None = ({"ddp": {"bucket_cap_mb": cap}} if cap else
                         {"hook": "bf16"} if setting.backend == "nccl" else None)
    change = advice.last_bucket(tensors, b.last_bytes, setting.shared, ms[i].micro_quiet > 0)
    return make(LAST_BUCKET, "", lasts, ms, detail, change, knob=knob)


def small_buckets(ms, run, setting) -> tuple[object, list]:
    """Many small buckets: each pays the all-reduce's fixed cost; on shared cores the overlapped calls
    take cycles from the backward, so the cost shows as a slower backward, not as exposed time. Its
    seconds: the extra calls' share of the transfer exposed after every rank was ready (measured; the
    rest stays the exposed all-reduce's) or, where larger, an estimate of their fixed cost (suspected):
    the link's fitted latency where known, else the smallest bucket's quickest calls (its bytes
    included: an upper bound; a median call also holds the waits for the backward it overlaps).
    Returns (the finding or None, the transfer it took, s per rank)."""
    none = [0.0] * len(ms)
    m = max(ms, key=lambda x: x.buckets.count if x.buckets else 0)
    b = m.buckets
    if not b or b.count < MANY_BUCKETS or b.bytes / b.count > SMALL_MESSAGE:
        return None, none
    least = min((n for n, _ in b.durations), default=None)
    small = sorted(d for n, d in b.durations if n == least and n <= SMALL_MESSAGE)
    per_call = setting.per_call or (small[len(small) // 10] if small else None)
    model = run[0].model
    extra = b.count - (int(b.bytes // advice.DEFAULT_CAP) + 2)
    syncs = m.steps - m.micro_quiet
    est = max(0.0, extra * per_call * syncs) if per_call is not None else None
    # merging sends the same bytes in fewer calls: of the exposed transfer, the extra calls' share is
    # charged here (each call costing alike), the rest stays the exposed all-reduce's
    share = max(0, extra) / b.count
    exposed = [x.transfer * share for x in ms]
    source = ("the all-reduce fit" if setting.per_call else
              f"the quickest tenth of this run's smallest bucket ({(least or 0) / 1024:.3g} KiB), bytes and all")
    cost = (f"every extra call's fixed cost about {est:.3g} s ({extra} extra calls a step x {per_call * 1e3:.3g} "
            f"ms, {source}, over {syncs} steps)" if est is not None and per_call is not None
            else "the cost per call is unknown")
    detail = (f"{b.count} buckets a step, {b.bytes / b.count / 1024:.3g} KiB each (median); the extra "
              f"calls' share ({max(0, extra)} of {b.count}) of the all-reduce exposed after every rank was ready, "
              f"s per rank: {_fmt(exposed)}; {cost}")
    change = advice.small_buckets(model.get("bucket_cap_bytes"), b.count, b.bytes / b.count, b.bytes)
    per = [max(e, est or 0.0) for e in exposed]
    status = MEASURED if est is None or max(exposed) >= est else SUSPECTED
    return make(SMALL_BUCKETS, "", per, ms, detail, change, status=status, knob={"ddp": {"bucket_cap_mb": 25}}), exposed


def collectives(ms, att) -> object:
    """The collectives the script issues itself inside its steps (Lightning's `self.log(sync_dist=True)`,
    a metric's sync, a barrier): their time, with the others' waits for them, apart from the compute
    they ran in (measured; on a GPU from the events around each call)."""
    own = [m.collectives for m in ms]
    if not any(own):
        return None
    waited = [a.charged_to("collectives") for a in att.ranks]
    m = ms[max(range(len(ms)), key=own.__getitem__)]
    per_step = m.collective_calls / m.steps if m.steps else 0.0
    detail = (f"{m.collective_calls} calls ({per_step:.3g} a step) to torch.distributed collectives outside "
              f"DDP's gradient buckets, s per rank: {_fmt(own)}")
    if any(waited):
        detail += f"; the others' waits for them: {_fmt(waited)}"
    return make(COLLECTIVES, "", [a + b for a, b in zip(own, waited, strict=True)], ms, detail,
                advice.FIXED["collectives"], needs_code=True)
