"""Notebook 00's procedure walked on one run: the seven measurements, in order, each read off a run of
`train.rounds` and its `diagnose` result. Printed readings, not verdicts: each says what was measured.
Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

import statistics

from ...tool.diagnosis import causes as C


def _finding(found, cause) -> str:
    f = found.startup if cause == C.STARTUP else found.finding(cause)
    return f"{f.seconds:.2f} s, {f.share:.0%} of the wall" if f else "not among the findings (under 3% of the window)"


def walk(raw: list, times: dict, found, one: str, two: str, round_: int = 1) -> list[str]:
    """The readings of the procedure for setup `two` (2 ranks) against `one` (1 rank): `raw` what
    `launch(train.rounds, ...)` returned, `times` as `readout.times` gives them, `found` the `diagnose`
    of round `round_` of `two`. Defined in notebook 07_diagnose_your_own_run."""
    speed = [a / b for a, b in zip(times[one], times[two], strict=True)]
    eff = statistics.median(speed) / 2
    ranks = [rank["runs"][two][round_] for rank in raw]
    steps = [len(r["timer"]["steps"]) for r in ranks]
    single = len(raw[0]["runs"][one][round_]["timer"]["steps"])
    med = lambda r, k: statistics.median(s.get(k) or 0.0 for s in r["timer"]["steps"][2:])  # noqa: E731
    nbytes, exposed, step = med(ranks[0], "allreduce_bytes"), med(ranks[0], "exposed"), med(ranks[0], "step_time")
    # compute phases only: a rank's data wait is too small and too noisy to call an imbalance
    slow = {k: min(v) for k, v in found.scores.items() if k in ("forward", "backward_compute", "optimizer")}
    worst = min(slow, key=slow.get) if slow else None
    return [
        f"1. scaling efficiency: {eff:.0%} (speed-up {min(speed):.2f} .. {max(speed):.2f}x on 2 ranks, "
        f"{len(speed)} rounds, whole runs)",
        f"2. steps per rank: {steps} on 2 ranks against {single} on 1: "
        + ("the data is split" if max(steps) <= single / 2 + 1 else "every rank gets the whole data"),
        f"3. {nbytes / 2**20:.2f} MiB all-reduced per step; exposed {exposed * 1e3:.1f} ms of a "
        f"{step * 1e3:.1f} ms step; exposed all-reduce: {_finding(found, C.EXPOSED)}",
        "4. transport: gloo over loopback on one machine's cores here; on GPUs read `nvidia-smi topo -m` and "
        "NCCL_DEBUG=INFO (the recorded lines above) and run `python -m ddp_lessons allreduce`",
        f"5. imbalance: slowest phase ratio {slow[worst]:.2f} ({worst})" if worst else
        "5. imbalance: every rank within 5% of the fastest in every phase",
        f"   waiting for a slower rank: {_finding(found, C.WAITING)}",
        f"6. host-bound steps: {_finding(found, C.HOST)}; data-loading wait: {_finding(found, C.DATA)}",
        f"7. per launch: start-up {_finding(found, C.STARTUP)}; per epoch: work outside the steps "
        f"{_finding(found, C.OUTSIDE)}",
    ]
