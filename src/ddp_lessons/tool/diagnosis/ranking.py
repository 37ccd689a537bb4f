"""`diagnose(run)`: where a DDP run's time went, ranked by what it cost.

Reads a `Run` (or what `Run` takes), measures each rank (`diagnosis.measures`), charges each wait to
what made the late rank late (`diagnosis.waits`), decides each cause from the run's setting
(`diagnosis.findings`, `diagnosis.setting`) and returns a `Diagnosis`: the loop's findings ranked by
seconds, start-up apart, what was checked and found as it should be, notes and what stays undecided.
"""

from __future__ import annotations

import dataclasses

from ..runs import Run
from . import communication as C
from . import findings as F
from .host import host_bound
from .measures import WARMUP_STEPS, measures
from .report import MEASURED, SUSPECTED, Diagnosis
from .setting import setting_of
from .waits import attribute

# Two findings whose seconds are within 25% of each other, one of them an estimate (suspected): their order
# is not decided by these numbers (the held-out ViT's data wait and small buckets swapped places so).
MARGIN = 0.25

SCORED = ("data", "forward", "backward_compute", "optimizer")  # compute phases: no waits in them


def diagnose(run, epochs: float | None = None, iterations: int | None = None, link=None) -> Diagnosis:
    """Diagnose one run: a `Run`, what `launch`/`run`/`gather` returned from workers that used
    `StepTimer`, a saved record's name (`Run.load`). Defined in notebook 01_case1_broken.

    Seconds are summed over every step (warm-up included: it is time the run spent). `epochs` (passes
    over the loader, `timer.data`) or `iterations` (optimizer steps): the run length to rank the causes
    at; recurring costs are scaled from the measured length, start-up is not. `link`: an all-reduce
    fit (`allreduce.fit_latency_bandwidth`) whose latency prices each call."""
    run = run if isinstance(run, Run) else Run(run)
    world = run.world_size
    ms = [measures(r) for r in run]
    setting = setting_of(run, link)
    att = attribute(run.ranks, setting.shared)
    notes = []
    if epochs is not None or iterations is not None:
        factor, line = _projection(run, ms, epochs, iterations)
        notes.append(line)
        ms = [_scale(m, factor) for m in ms]
        att = dataclasses.replace(att, ranks=[a.scaled(factor) for a in att.ranks])
    found = F.outside(ms, att, world, run, setting)
    if world > 1:   # many small buckets first: the exposed transfer is theirs then
        small, taken = C.small_buckets(ms, run, setting)
        found += [small] + F.waiting(ms, att, setting) + C.transfer(ms, run, setting, taken)
        found += [C.accumulation(ms, setting, notes), F.threads(ms, att, setting)]
    found += [C.collectives(ms, att)]
    host, host_undecided = host_bound(ms, run, _host_syncs(run[0]) if run[0].on_gpu else None)
    found += [F.data(ms, att, setting, run), F.untimed(ms, att), host]
    # each second of a rank's window charged once: estimates take what the measured findings left
    found = fit([f for f in found if f is not None], ms)
    # one order for all, by seconds: a suspected finding's are an estimate, and it says so
    ranked = sorted(found, key=lambda f: -f.seconds)
    notes += margins(ranked)
    summary = [_summary(m, r.account if m.account else None) for m, r in zip(ms, run, strict=True)]
    notes += _notes(run, ms, att, setting)
    undecided = _undecided(run, ms, world) + ([host_undecided] if host_undecided else [])
    first = run[0]
    where = f" ({first.backend or 'no group'}, {first.device})"
    return Diagnosis(ranked, undecided, summary, world, where, notes, scores(run), F.startup(ms),
                     _confirmations(run, ms, att, world))


def _summary(m, acc: dict | None) -> dict:
    """A rank's row of `Diagnosis.ranks`: its wall, steps, outside work and unattributed seconds."""
    return {"rank": m.rank, "wall": m.wall, "n_steps": m.steps, "steps": acc["steps"] if acc else m.wall,
            "outside": sum(m.outside.values()), "outside_work": dict(m.outside),
            "unattributed": acc["unattributed"] if acc else None}


def fit(found: list, ms: list) -> list:
    """Findings whose seconds on no rank sum past that rank's window: the measured ones are disjoint by
    how they are taken apart (waits, exposed, data, outside, untimed, collectives, idle compute); an
    estimate (suspected) is cut to what the measured ones left on each rank, the larger estimates first."""
    used = [0.0] * len(ms)
    for f in found:
        if f.status == MEASURED:
            used = [u + (x or 0.0) for u, x in zip(used, f.per_rank, strict=True)]
    out = [f for f in found if f.status == MEASURED]
    for f in sorted((f for f in found if f.status != MEASURED), key=lambda f: -f.seconds):
        per = [max(0.0, min(x or 0.0, m.window - u)) for x, m, u in zip(f.per_rank, ms, used, strict=True)]
        used = [u + x for u, x in zip(used, per, strict=True)]
        if per != list(f.per_rank):
            f = refit(f, per, ms)
        if f is not None:
            out.append(f)
    return out


def refit(f, per: list, ms: list):
    """`f` with seconds `per` on each rank (None where nothing is left of it)."""
    i = max(range(len(ms)), key=per.__getitem__)
    if per[i] <= 0 and f.seconds > 0:
        return None
    m = ms[i]
    return dataclasses.replace(f, seconds=per[i], per_rank=per, rank=m.rank,
                               share=per[i] / m.wall if m.wall > 0 else 0.0,
                               window_share=per[i] / m.window if m.window > 0 else 0.0)


def margins(ranked: list) -> list[str]:
    """A note for each pair of neighbours whose order an estimate within MARGIN leaves undecided."""
    out = []
    for i, (a, b) in enumerate(zip(ranked, ranked[1:], strict=False), 1):
        if SUSPECTED in (a.status, b.status) and a.seconds > 0 and b.seconds >= (1 - MARGIN) * a.seconds:
            est = a if a.status == SUSPECTED else b
            out.append(f"findings {i} and {i + 1} are within {MARGIN:.0%} of each other and {est.label!r} is an "
                       "estimate: their order is not decided here (`doctor --confirm` measures what each change "
                       "saves)")
    return out


def _projection(run, ms, epochs, iterations) -> tuple[float, str]:
    if epochs is not None and iterations is not None:
        raise ValueError("give epochs= or iterations=, not both")
    if epochs is not None:
        done = {r.data_passes for r in run}
        if len(done) != 1 or not next(iter(done)):
            raise ValueError(f"diagnose(epochs={epochs!r}) scales from the measured passes over the loader, but the "
                             "result has none (steps not fed by timer.data): give iterations= (optimizer steps) "
                             "instead")
        n, unit, want = next(iter(done)), "epochs", epochs
    else:
        n, unit, want = max(m.optimizer_steps or m.steps for m in ms), "optimizer steps", iterations
    if not (isinstance(want, (int, float)) and want > 0):
        raise ValueError(f"{unit}={want!r}: give the run length to project to, a positive number")
    return want / n, (f"projected to {want:g} {unit} from the {n} measured: recurring costs x{want / n:.3g}, "
                      "start-up once (it is paid once per launch)")


def _scale(m, factor):
    """A rank's measures at `factor` times the measured length; start-up stays as it is."""
    once = m.data_launch or 0.0   # the loader's start in the first step: once per launch
    scaled = {k: (once if k == "data" else 0.0) + (v - (once if k == "data" else 0.0)) * factor
              for k in ("wait", "exposed", "data", "data_host", "transfer", "accumulation", "accumulation_busy",
                        "untimed", "after", "compute") if (v := getattr(m, k)) is not None}
    buckets = m.buckets and dataclasses.replace(m.buckets, last_seconds=m.buckets.last_seconds * factor)
    start = (m.startup or 0.0) + once
    return dataclasses.replace(m, **scaled, buckets=buckets, steps=round(m.steps * factor),
                               outside={k: v * factor for k, v in m.outside.items()},
                               wall=start + (m.wall - start) * factor, window=m.window * factor)


def _notes(run, ms, att, setting) -> list[str]:
    out = [f"phase times from the {'host clock' if setting.clock == 'host' else 'GPU (CUDA events between marks)'}"]
    for h in setting.hosts:
        if h.shared:
            jit = max(a.jitter for a in att.ranks)
            gloo = f" (+ gloo's {h.gloo_threads // h.ranks} each)" if h.gloo_threads else ""
            out.append(f"ranks share cores: {h.ranks} ranks x {h.threads // h.ranks} torch thread(s){gloo} on "
                       f"{h.cores} cores of {h.name}: communication that overlaps compute, loader workers and "
                       f"peers take cycles from a rank's compute; {jit:.3g} s of a rank's waits are step-to-step "
                       "jitter from it (the late rank changes), not uneven work")
    if unused_none(run):
        out.append(f"find_unused_parameters=True, but no parameter went unused on any of the {len(run)} rank(s) in the "
                   "iterations DDP recorded (its logging data: the first 10, then a sample): DDP walks the autograd "
                   "graph and all-reduces a map of used parameters every step for nothing; set it to False, unless "
                   "the unused set changes from step to step (LayerDrop, MoE routing, heads chosen per batch: then "
                   "it must stay True; `doctor --confirm` runs it and says if it fails)")
    for r in run[:1]:
        syncs = _host_syncs(r)
        if syncs:
            out.append(f"a host sync every step in phase {syncs!r}: the host waited on the GPU there (loss.item(), "
                       ".cpu(), a printed tensor); log every N steps")
    exposed = max(m.exposed for m in ms)
    if run.world_size == 1 and exposed >= F.MIN_SHARE * max(m.window for m in ms):
        out.append(f"DDP's own per-step overhead at world size 1 (nothing is sent): "
                   f"{exposed:.3g} s after the backward; a plain model, or a run on several "
                   "ranks, does without it")
    return out


def unused_none(run) -> bool:
    """find_unused_parameters=True and every rank's DDP found nothing unused."""
    models = [r.model for r in run]
    return bool(models) and all(m.get("find_unused_parameters") and m.get("unused_parameter_bytes") == 0
                                for m in models)


def _host_syncs(r) -> str | None:
    """A phase whose host span exceeds its device span by 20% of the step in most steps (GPU, host spans known)."""
    steps = [s for s in r.steps(WARMUP_STEPS) if s.host]
    if len(steps) < 5:
        return None
    for name in steps[0].host:
        over = [s.host[name] - (s.seconds(name) or 0.0) >= 0.2 * s.step_time for s in steps if name in s.host]
        if over and sum(over) >= 0.8 * len(over):
            return name
    return None


def _confirmations(run, ms, att, world) -> list[str]:
    out = []
    if world == 1:
        out.append("world size 1: nothing is communicated, so there is no all-reduce or waiting to find")
    for m in ms[:1]:
        if m.micro_quiet and not m.micro_synced and m.optimizer_steps:
            k = (m.micro_quiet + m.optimizer_steps) / m.optimizer_steps
            out.append(f"accumulation: {k:.3g} micro-steps per optimizer step, all-reduced once per optimizer step, "
                       "as it should")
    if world > 1 and all(m.has_wait for m in ms):
        waited = max(a.total for a in att.ranks)
        if waited < F.MIN_SHARE * min(m.window for m in ms):
            out.append(f"the ranks kept pace: at most {waited:.3g} s of waiting on a rank")
    model = run[0].model
    unused = model.get("unused_parameter_bytes") or 0
    if model.get("find_unused_parameters") and unused > 0:
        out.append(f"find_unused_parameters=True is needed: {unused / 2**20:.3g} MiB of "
                   "parameters got no gradient")
    return out


def scores(run) -> dict:
    """Per compute phase, each rank's median per step relative to the fastest rank's (1.0: the fastest;
    0.67: this rank takes 1.5x as long); phases no rank spends time in are left out."""
    if len(run) < 2:
        return {}
    out = {}
    for key in SCORED:
        meds = []
        for r in run:
            v = sorted(getattr(s, key) or 0.0 for s in r.steps(WARMUP_STEPS) or r.steps())
            meds.append(v[len(v) // 2] if v else 0.0)
        if min(meds) > 0:
            out[key] = [min(meds) / x for x in meds]
    return out


def _undecided(run, ms, world) -> list[str]:
    """What the numbers cannot decide, each as one line saying what would."""
    out = []
    if not all(m.account for m in ms):
        out.append("work outside the steps, untimed host work and start-up: the result has no account (a timer "
                   "older than the account); measure again with this StepTimer")
    if len(run) < world:
        out.append(f"waiting for a slower rank: only {len(run)} of {world} ranks' results given")
    comm = [r for r in run if r.comm_source != "none"]
    if world > 1 and len(comm) < len(run):
        out.append("exposed all-reduce vs waiting: the all-reduce was not timed (give StepTimer the DDP model)")
    elif world > 1 and not all(m.has_exposed for m in ms):
        out.append(f"exposed all-reduce and waiting: not measured; the timer read {comm[0].comm_source} "
                   "only (mode 'light' with ddp_logging=False): leave ddp_logging at None or use mode 'full'")
    elif world > 1 and not all(m.has_wait for m in ms):
        out.append("waiting for a slower rank vs exposed all-reduce: no common clock (the timer was created before "
                   "the process group, or the ranks ran on several hosts); `exposed` includes any wait")
    after = max(((m.after / m.wall) if m.wall else 0.0) for m in ms)
    if after >= F.MIN_SHARE:
        out.append(f"{after:.0%} of a rank's wall after its last step is not in timer.outside(): wrap that work "
                   "(final evaluation, saving) in timer.outside(name) to have it named")
    dropped = max((r.flight_recorder.get("steps_dropped") or 0) for r in run)
    if dropped:
        out.append(f"all-reduce calls and bytes of the first {dropped} steps: the flight recorder's ring no longer "
                   "held them; a larger ring (TORCH_FR_BUFFER_SIZE) keeps more")
    return out
