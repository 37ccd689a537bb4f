"""Each cause's finding, decided from the run's context: whether it fires, its seconds per rank,
the numbers that show it and what to change (`diagnosis.advice`). The thresholds are the constants
below; the comment at each says why it has its value.
"""

from __future__ import annotations

import math

from . import advice
from .causes import CAUSES, DATA, JITTER, OUTSIDE, STARTUP, THREADS, UNTIMED, WAITING
from .report import SUSPECTED, Finding

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
# Loader workers the doctor tries at most per rank (common practice is 4 to 8, tuned by the data wait):
# every spare core would leave none for the pin-memory thread, NCCL's proxy or the driver.
MOST_WORKERS = 8
LOADER_START = "loader workers"    # the doctor's name for a loader's workers starting and stopping begins so
EVALUATION = "evaluation"          # the doctor's name for forwards without gradients between steps begins so


def _fmt(per) -> str:
    return ", ".join("-" if x is None else f"{x:.3g}" for x in per)


def make(cause, what, per, ms, detail, change, status="measured", needs_code=False, floor=True, knob=None,
         saves=None):
    """A Finding at the rank where `per` is largest; None under MIN_SHARE of that rank's window. `saves`:
    the fraction of its seconds the change would save, where not all of them (a model)."""
    vals = [x or 0.0 for x in per]
    i = max(range(len(ms)), key=vals.__getitem__)
    m, secs = ms[i], vals[i]
    window_share = secs / m.window if m.window > 0 else 0.0
    if floor and window_share < MIN_SHARE:
        return None
    return Finding(cause, what, secs, secs / m.wall if m.wall > 0 else 0.0, list(vals), detail, change,
                   CAUSES[cause][1], status, window_share, m.rank, needs_code, knob,
                   None if saves is None else saves * window_share)


def outside(ms, att, world, run=None, setting=None) -> list:
    out = []
    for name in dict.fromkeys(n for m in ms for n in m.outside):
        own = [m.outside.get(name, 0.0) for m in ms]
        waited = [a.charged_to("outside", name) for a in att.ranks] if world > 1 else [0.0] * len(ms)
        detail = f"{name!r} s per rank: {_fmt(own)}"
        if any(waited):
            detail += f"; the others' waits for it, s per rank: {_fmt(waited)} (counted here, not as waiting)"
        knob, saves = None, None
        if name.startswith(LOADER_START):
            loader = (run[0].loader if run is not None else None) or {}
            knob, why = loader_knob(loader, setting)
            change, code = advice.loader_start(loader, run[0].start_method if run else None, why), False
        else:
            change, code = advice.outside(world, own, waited)
            sharded = _eval_sharded(run) if run is not None and name.startswith(EVALUATION) else None
            if sharded is not None and world > 1 and max(own) <= 1.5 * min(own):
                change, saves = advice.evaluation(world, sharded), (None if sharded else 1 - 1 / world)
        out.append(make(OUTSIDE, name, [a + b for a, b in zip(own, waited, strict=True)], ms, detail, change,
                        needs_code=code, knob=knob, saves=saves))
    return out


def _eval_sharded(run) -> bool | None:
    """Whether the evaluations' loaders gave each rank its shard (every one a DistributedSampler's), from the
    doctor's record of them; None where unknown."""
    loaders = [x for r in run for x in r.doctor.get("eval_loaders") or []]
    if not loaders or any("sharded" not in x for x in loaders):
        return None
    return all(x.get("sharded") for x in loaders)


def loader_knob(loader: dict, setting) -> tuple[dict | None, str]:
    """The knob for a loader's workers starting at every pass: fewer workers where they are over the spare
    cores a rank has (no spare core: none, the work back in the rank), else persistent workers."""
    workers = loader.get("num_workers") or 0
    spare = setting.spare_per_rank() if setting is not None else None
    if spare is not None and workers > max(0, spare):
        return ({"loader": {"num_workers": max(0, spare)}},
                f"its {workers} worker(s) a rank are over the {max(0, spare)} spare core(s) a rank has")
    if workers and not loader.get("persistent_workers"):
        return {"loader": {"persistent_workers": True}}, "its workers start at every pass"
    return None, ""


def waiting(ms, att, setting) -> list:
    """Imbalance (one rank late by a margin) and jitter; jitter on shared cores is a note, not a finding."""
    out = []
    if att.slower is not None:
        per = [a.imbalance for a in att.ranks]
        gap = ", ".join(f"{k} {v * 1e3:+.3g} ms" for k, v in att.gap.items() if abs(v) > 0)
        detail = (f"rank {att.slower} was the late one at {att.late_share:.0%} of {len(att.late)} "
                  "all-reduces; "
                  f"its median per step against the others': {gap}; waited s per rank: {_fmt(per)}")
        out.append(make(WAITING, "", per, ms, detail, advice.imbalance(att.slower, att.gap)))
    if not setting.shared:
        per = [a.jitter for a in att.ranks]
        detail = f"the late rank changed from step to step; waited s per rank: {_fmt(per)}"
        out.append(make(JITTER, "", per, ms, detail, advice.jitter(False)))
    return out


def threads_knob(setting) -> dict | None:
    """Ranks sharing cores with more than one thread each: the threads that divide the cores among them."""
    if not setting.shared or not setting.hosts or setting.gpu:
        return None
    n = max(1, min(h.cores // max(1, h.ranks) for h in setting.hosts))
    return {"threads": n} if any(h.threads > n * h.ranks for h in setting.hosts) else None


def threads(ms, att, setting) -> object:
    """Ranks whose torch threads together exceed their host's cores (CPU ranks; `mp.spawn` and a plain
    `python` leave each rank every core's threads, torchrun gives each 1 unless told). Measured: the
    ranks' waits for each other that changed rank from step to step; the compute lost to the
    oversubscription is not measured here, so the finding is suspected and its knob says."""
    knob = threads_knob(setting)
    over = [h for h in setting.hosts if h.ranks > 1 and h.threads > h.cores]
    if knob is None or not over:
        return None
    h, n = over[0], knob["threads"]
    per = [a.jitter for a in att.ranks]
    detail = (f"{h.ranks} ranks x {h.threads // h.ranks} torch threads on {h.cores} cores of {h.name} (over the "
              f"cores: they take turns); the ranks' waits for each other as the late rank changed from step to "
              f"step, s per rank: {_fmt(per)}; the compute lost to it is not measured here: "
              f"threads={n} measures it (`doctor --confirm`)")
    return make(THREADS, "", per, ms, detail, advice.threads(h, n), status=SUSPECTED, floor=False,
                knob=knob)


def data_knob(m, setting, loader) -> tuple[dict | None, str]:
    """The loader knob that tests the data wait within the core budget, and why (or why none): never more
    workers than the spare cores per rank (and MOST_WORKERS), as many as the wait needs."""
    if loader is None:
        return None, "the loader was not seen"
    workers, spare = loader.get("num_workers") or 0, setting.spare_per_rank()
    if spare is not None and workers > max(0, spare):
        return ({"loader": {"num_workers": max(0, spare)}},
                f"{workers} worker(s) a rank over {max(0, spare)} spare core(s) a rank: fewer")
    if not workers:
        if spare is not None and spare < 1:
            return None, "no spare core for a loader worker: not tried"
        steps = max(1, m.steps)
        need = math.ceil((m.data / steps) / max(m.compute_step, 1e-6)) + 1
        n = max(1, min(need, MOST_WORKERS, spare if spare is not None else MOST_WORKERS))
        return ({"loader": {"num_workers": n, "persistent_workers": True}},
                f"{n} worker(s) a rank: the wait per step over the compute per step, within "
                f"{spare if spare is not None else 'unknown'} spare core(s) a rank")
    if setting.gpu and not loader.get("pin_memory"):
        return {"loader": {"pin_memory": True}}, "pinned memory for the copy to the GPU"
    return None, "the loader's workers are within the cores already"


def data(ms, att, setting, run) -> object:
    own = [m.data for m in ms]
    waited = [a.charged_to("data") for a in att.ranks]
    detail = "waiting for batches inside the steps, s per rank: " + _fmt(own)
    if run[0].on_gpu and any(m.data != m.data_host for m in ms):
        detail += " (what the GPU waited: each step's start to its first phase)"
    if any(waited):
        detail += f"; the others' waits for it: {_fmt(waited)}"
    loader = run[0].loader
    if loader:
        detail += f"; loader: num_workers={loader['num_workers']}, persistent_workers={loader['persistent_workers']}"
    else:
        detail += "; the loader's settings are not in this result (no DataLoader was read: its workers are unknown)"
    m = ms[max(range(len(ms)), key=own.__getitem__)]
    knob, why = data_knob(m, setting, loader)
    detail += f"; the knob: {why}"
    return make(DATA, "", [a + b for a, b in zip(own, waited, strict=True)], ms, detail,
                advice.data(setting, loader, setting.gpu), knob=knob)


def untimed(ms, att) -> object:
    if any(m.untimed is None for m in ms):
        return None
    own = [m.untimed for m in ms]
    waited = [a.charged_to("untimed") for a in att.ranks]
    detail = f"time in and between steps no phase covers, s per rank: {_fmt(own)}"
    if any(waited):
        detail += f"; the others' waits for it: {_fmt(waited)}"
    return make(UNTIMED, "", [a + b for a, b in zip(own, waited, strict=True)], ms, detail, advice.FIXED["untimed"])


def startup(ms) -> Finding | None:
    if any(m.startup is None for m in ms):
        return None
    per = [m.startup for m in ms]
    i = max(range(len(ms)), key=per.__getitem__)
    return Finding(STARTUP, "", per[i], per[i] / ms[i].wall if ms[i].wall else 0.0, per,
                   f"the run's start (the process's, or the timer's run_start) to the first step, s per rank: "
                   f"{_fmt(per)}", advice.FIXED["startup"], CAUSES[STARTUP][1], rank=ms[i].rank)
