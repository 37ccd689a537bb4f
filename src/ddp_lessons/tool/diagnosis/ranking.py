"""`diagnose(results)`: where a DDP run's time went, ranked by what it cost.

Reads the timer results of one run (`diagnosis.inputs` says which shapes),
measures each rank (`diagnosis.rules`, with the thresholds and why), and
returns a `Diagnosis`: findings ranked by seconds lost, each with its cause
from the fixed vocabulary `CAUSES` (`diagnosis.causes`), its seconds and share
of the wall time, the per-rank numbers that show it, what to change and how
to check the change; and what it cannot decide, as `undecided` lines.
"""

from __future__ import annotations

from . import rules
from .causes import CAUSES
from .inputs import rank_results
from .report import Diagnosis, Finding


SCORED = ("data", "forward", "backward_compute", "optimizer", "step_time")


def diagnose(results, epochs: float | None = None) -> Diagnosis:
    """Diagnose one run: what `launch`/`run` returned from workers that used
    `StepTimer` (each rank's value the timer's result or a dict holding it
    under "timer"), a saved record, or a record's name. Defined in notebook 01_case1_broken.

    Wall time per rank is the run's start to `result()`: the timer's window plus the start-up
    before it (from the process's start, or from the timer's `run_start` where several runs share
    a process; none where it is None). Seconds are summed over every step (warm-up included: it
    is time the run spent).

    `epochs`: the run length to rank the causes at, in passes over the loader (`timer.data`): the
    recurring costs are scaled from the measured passes (`result()["data_passes"]`) to `epochs`,
    start-up (once per launch) is not, and the findings are ranked at that length."""
    ranks = rank_results(results)
    world = max(int(r.get("world_size") or len(ranks)) for r in ranks)
    ms = [rules.measures(r) for r in ranks]
    rules.charge_peer_waits(ranks, ms)   # each second of a rank's wall in at most one finding
    notes, factor = [], 1.0
    if epochs is not None:
        factor, line = _projection(ranks, epochs)
        notes.append(line)
        for m in ms:
            _scale(m, factor)
    found = [Finding(cause, what, secs, share, per, detail, CAUSES[cause][1], CAUSES[cause][2])
             for cause, what, secs, share, per, detail in rules.all_findings(ms, world)]
    notes += _shared_cores(ms)
    first = ranks[0]
    setup = f" ({first.get('backend') or 'no group'}, {first.get('device', '?')})"
    summary = [{"rank": m["rank"], "wall": m["wall"], "n_steps": m["steps"],
                "steps": r["account"]["steps"] if m["account"] else m["wall"],
                "outside": sum(m["outside"].values()), "outside_work": dict(m["outside"]),
                "unattributed": r["account"]["unattributed"] if m["account"] else None}
               for m, r in zip(ms, ranks, strict=True)]
    return Diagnosis(found, undecided(ranks, ms, world), summary, world, setup, notes, scores(ranks))


def _projection(ranks, epochs) -> tuple[float, str]:
    done = {r.get("data_passes") for r in ranks}
    if len(done) != 1 or not next(iter(done)):
        raise ValueError(f"diagnose(epochs={epochs!r}) scales from the measured passes over the loader, but the "
                         "result has none (a timer older than data_passes, or steps not fed by timer.data): "
                         "diagnose without epochs=")
    if not (isinstance(epochs, (int, float)) and epochs > 0):
        raise ValueError(f"epochs={epochs!r}: give the run length to project to, a positive number of epochs")
    n = next(iter(done))
    return epochs / n, (f"projected to {epochs:g} epochs from the {n} measured: recurring costs x{epochs / n:.3g}, "
                        "start-up once (it is paid once per launch)")


def _scale(m, factor) -> None:
    """A rank's measures at `factor` times the measured run length; start-up stays as it is."""
    keys = ("wait", "exposed", "data", "data_host", "transfer", "accumulation", "last_bucket", "host", "after")
    once = {"data": m.get("data_launch") or 0.0}   # the loader's start in the first step: once per launch
    for k in keys:
        if m.get(k) is not None:
            m[k] = once.get(k, 0.0) + (m[k] - once.get(k, 0.0)) * factor
    m["outside"] = {k: v * factor for k, v in m["outside"].items()}
    m["induced"] = {k: v * factor for k, v in m.get("induced", {}).items()}
    start = (m["startup"] or 0.0) + once["data"]   # paid once per launch, as the start-up
    m["wall"] = start + (m["wall"] - start) * factor


def _shared_cores(ms) -> list[str]:
    hosts = {}
    for m in ms:
        if m["hostname"] and m["threads"] and m["cores"]:
            hosts.setdefault(m["hostname"], []).append(m)
    out = []
    for host, on in hosts.items():
        threads, cores = sum(m["threads"] for m in on), on[0]["cores"]
        if len(on) > 1 and threads > cores:
            out.append(f"{len(on)} ranks run {threads} threads on {cores} cores of {host}: they share cores, so "
                       "a rank's wait is partly time its peers took from it, and evening their work may save "
                       "less than the wait")
    return out


def scores(ranks) -> dict:
    """Per phase, each rank's median per step relative to the fastest rank's (1.0: the fastest;
    0.67: this rank takes 1.5x as long), as in straggler detection; phases no rank spends time in
    are left out."""
    if len(ranks) < 2:
        return {}
    out = {}
    for key in SCORED:
        meds = []
        for r in ranks:
            v = sorted(s.get(key) or 0.0 for s in r["steps"][rules.WARMUP_STEPS:] or r["steps"])
            meds.append(v[len(v) // 2] if v else 0.0)
        if min(meds) > 0:
            out[key] = [min(meds) / x for x in meds]
    return out


def undecided(ranks, ms, world) -> list[str]:
    """What the numbers cannot decide, each as one line saying what would."""
    out = []
    if not all(m["account"] for m in ms):
        out.append("work outside the steps, host work and start-up: the result has no account (a timer "
                   "older than the account); measure again with this StepTimer")
    if len(ranks) < world:
        out.append(f"ranks waiting for a slower rank: only {len(ranks)} of {world} ranks' results given")
    comm = world > 1 and all(r.get("comm_source", "none") != "none" for r in ranks)
    timed = [r for r in ranks if r.get("comm_source", "none") != "none"]
    if world > 1 and not comm:
        out.append("exposed all-reduce vs waiting: the all-reduce was not timed (give StepTimer the DDP model)")
    elif timed and not all(m["has_exposed"] for m in ms):
        out.append(f"exposed all-reduce{' and waiting for a slower rank' if world > 1 else ''}: not measured; "
                   f"the timer read {timed[0].get('comm_source')} only (mode 'light' with ddp_logging=False, or a "
                   "run too short for DDP's timings): leave ddp_logging at None (DDP's timings on a sample of "
                   "steps) or use mode 'full'")
    elif world > 1 and not all(m["has_wait"] for m in ms):
        out.append("waiting for a slower rank vs exposed all-reduce: no common clock (the timer was created "
                   "before the process group, or on one rank only); `exposed` includes any wait")
    else:
        err = max((r.get("clock") or {}).get("error", 0.0) * m["steps"] for r, m in zip(ranks, ms, strict=True))
        top = max((m["wait"] for m in ms), default=0.0)
        if world > 1 and top > 0 and err > rules.CLOCK_TRUST * top:
            out.append(f"waiting for a slower rank: the clock's error over the steps ({err:.3g} s) is over "
                       f"{rules.CLOCK_TRUST:.0%} of the largest wait ({top:.3g} s)")
    after = max(((m["after"] / m["wall"]) if m["wall"] else 0.0) for m in ms)
    if after >= rules.MIN_SHARE:
        out.append(f"{after:.0%} of a rank's wall after its last step is not in timer.outside(): wrap that "
                   "work (final evaluation, saving) in timer.outside(name) to have it named")
    gpu = [m["step_time"] for r, m in zip(ranks, ms, strict=True) if str(r.get("device", "")).startswith("cuda")]
    if gpu and min(gpu) < rules.SHORT_GPU_STEP:
        out.append(f"host-bound (kernel launches) GPU steps: the median step is {min(gpu) * 1e3:.3g} ms; CUDA "
                   "event marks cannot tell an idle GPU from a busy one: profile a few steps "
                   "(torch.profiler) or time the step as one CUDA graph")
    dropped = max(((r.get("flight_recorder") or {}).get("steps_dropped") or 0) for r in ranks)
    if dropped:
        out.append(f"all-reduce calls and bytes of the first {dropped} steps: the flight recorder's ring "
                   "(TORCH_FR_BUFFER_SIZE entries) no longer held them; a larger ring keeps more")
    return out
