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


def diagnose(results) -> Diagnosis:
    """Diagnose one run: what `launch`/`run` returned from workers that used
    `StepTimer` (each rank's value the timer's result or a dict holding it
    under "timer"), a saved record, or a record's name. Defined in notebook 01_case1_broken.

    Wall time per rank is the run's start to `result()`: the timer's window plus the start-up
    before it (from the process's start, or from the timer's `run_start` where several runs share
    a process; none where it is None). Seconds are summed over every step (warm-up included: it
    is time the run spent)."""
    ranks = rank_results(results)
    world = max(int(r.get("world_size") or len(ranks)) for r in ranks)
    ms = [rules.measures(r) for r in ranks]
    rules.charge_peer_waits(ranks, ms)   # each second of a rank's wall in at most one finding
    found = [Finding(cause, what, secs, share, per, detail, CAUSES[cause][1], CAUSES[cause][2])
             for cause, what, secs, share, per, detail in rules.all_findings(ms, world)]
    first = ranks[0]
    setup = f" ({first.get('backend') or 'no group'}, {first.get('device', '?')})"
    summary = [{"rank": m["rank"], "wall": m["wall"], "n_steps": m["steps"],
                "steps": r["account"]["steps"] if m["account"] else m["wall"],
                "outside": sum(m["outside"].values()), "outside_work": dict(m["outside"]),
                "unattributed": r["account"]["unattributed"] if m["account"] else None}
               for m, r in zip(ms, ranks, strict=True)]
    return Diagnosis(found, undecided(ranks, ms, world), summary, world, setup)


def undecided(ranks, ms, world) -> list[str]:
    """What the numbers cannot decide, each as one line saying what would."""
    out = []
    if not all(m["account"] for m in ms):
        out.append("work outside the steps, host work and start-up: the result has no account (a timer "
                   "older than the account); measure again with this StepTimer")
    if len(ranks) < world:
        out.append(f"ranks waiting for a slower rank: only {len(ranks)} of {world} ranks' results given")
    comm = world > 1 and all(r.get("comm_source", "none") != "none" for r in ranks)
    if world > 1 and not comm:
        out.append("exposed all-reduce vs waiting: the all-reduce was not timed (give StepTimer the DDP model)")
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
    return out
