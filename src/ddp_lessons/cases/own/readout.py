"""The workload's runs as numbers a lesson compares: the rounds run here as a `Record` (setup -> one `Run`
per round), a run's time (its slowest rank's wall, evaluation included), each rank's evaluation and
its share, the avoidable costs by cause, and the numbers each claim of `claims` is decided on.
Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ...tool.runs import Rank, Record, Run, read

CAUSES = ("duplicated evaluation", "data wait", "per-step logging", "exposed all-reduce")


@dataclass(frozen=True)
class Epoch:
    """One epoch of one rank as `train` returns it (seconds): its steps, the first of them in the timer,
    training, evaluation and the test samples the evaluation counted."""
    steps: int
    first_step: int
    train_s: float
    eval_s: float
    eval_samples: int | None = None


@dataclass(frozen=True)
class Result:
    """What one rank of `train` returned beside its timer, read once: its world size, wall (s) and
    `epochs` (`Epoch`s)."""
    world_size: int
    wall_s: float
    epochs: list[Epoch] = field(default_factory=list)

    @classmethod
    def of(cls, rank: Rank) -> Result:
        return read(cls, rank.value, epochs=lambda epochs: [read(Epoch, e) for e in epochs])


@dataclass(frozen=True)
class Rounds:
    """What `train.rounds` returned on one rank: setup -> its `train` result per round (`runs`), and the
    order they ran in."""
    runs: dict
    order: list


def record(raw: list, name: str = "measured here") -> Record:
    """What `launch(train.rounds, ...)` returned (one value per rank) as a `Record`: `.setups`,
    `.rounds(setup)` (one `Run` per round, of the ranks that ran it). Defined in notebook 07_diagnose_your_own_run."""
    ranks = [read(Rounds, r) for r in raw]
    setups = ranks[0].runs   # rank 0 takes part in every setup
    runs = {s: [[rank.runs[s][i] for rank in ranks if len(rank.runs[s]) > i] for i in range(len(setups[s]))]
            for s in setups}
    return Record({"kind": "own-rounds", "results": {"runs": runs, "order": ranks[0].order}}, name)


def run_time(run: Run) -> float:
    """A run's time: its slowest rank's wall (the others wait for it at the end).
    Defined in notebook 07_diagnose_your_own_run."""
    return max(Result.of(rank).wall_s for rank in run)


def times(rec: Record) -> dict:
    """setup -> each round's run time (s). Defined in notebook 07_diagnose_your_own_run."""
    return {s: [run_time(run) for run in rec.rounds(s)] for s in rec.setups}


def evaluation(rank: Rank) -> float:
    """Seconds this rank spent evaluating, summed over the epochs. Defined in notebook 07_diagnose_your_own_run."""
    return sum(e.eval_s for e in Result.of(rank).epochs)


def eval_samples(rank: Rank) -> int:
    """Test samples this rank evaluated in its first epoch. Defined in notebook 07_diagnose_your_own_run."""
    return Result.of(rank).epochs[0].eval_samples


def eval_share(rank: Rank) -> float:
    """Evaluation's share of this rank's training + evaluation time. Defined in notebook 07_diagnose_your_own_run."""
    ev, tr = evaluation(rank), sum(e.train_s for e in Result.of(rank).epochs)
    return ev / (ev + tr) if ev + tr else 0.0


def costs(run: Run, duplicated: bool = True) -> list[dict]:
    """Per rank, the seconds each avoidable cause took (`CAUSES`): the evaluation beyond the rank's share
    (eval x (1 - 1/world), where every rank evaluates the whole set; 0 when it is split), the wait for
    each batch, the per-step `loss.item()` and print, and the all-reduce the backward did not hide.
    Defined in notebook 07_diagnose_your_own_run."""
    out = []
    for rank in run:
        steps = rank.steps()
        dup = evaluation(rank) * (1 - 1 / Result.of(rank).world_size) if duplicated else 0.0
        out.append(dict(zip(CAUSES, (dup, sum(s.get("data", 0.0) for s in steps),
                                     sum(s.get("log", 0.0) for s in steps),
                                     sum(s.get("exposed") or 0.0 for s in steps)), strict=True)))
    return out


def amdahl(share: float, ranks: int = 2) -> float:
    """The most `ranks` ranks can speed a run up when a `share` of the 1-rank run is done whole on every
    rank (the evaluation, unsharded) and the rest splits: 1 / (share + (1 - share) / ranks).
    Defined in notebook 07_diagnose_your_own_run."""
    return 1 / (share + (1 - share) / ranks)


def paired(times: dict, a: str, b: str) -> dict:
    """Setup `b`'s run time over setup `a`'s, round by round (`times`: setup -> run time per round, in the
    same rounds): "median", "lo", "hi" of the ratios (under 1: `b` shorter). Defined in notebook
    07_diagnose_your_own_run."""
    ratios = [y / x for x, y in zip(times[a], times[b], strict=True)]
    return {"median": statistics.median(ratios), "lo": min(ratios), "hi": max(ratios), "rounds": len(ratios)}


def first_finding(found) -> str:
    """A `Diagnosis`'s first finding as the claim "doctor_ranks_evaluation_first" reads it: its cause,
    and for work outside the steps which work, its first words ("outside_steps: evaluation" for the
    doctor's "evaluation (forwards without gradients)"); "none" without findings.
    Defined in notebook 07_diagnose_your_own_run."""
    if found is None or not found.findings:
        return "none"
    f = found.findings[0]
    return f"{f.cause}: {f.what.split(' (')[0]}" if f.what else f.cause


def cost_ratio(run: Run, cause: str = CAUSES[0]) -> float:
    """`cause` summed over the ranks against every other cause summed over them: what the run lost to it,
    not one rank's share (one rank's wait can swell in one round on a busy machine).
    Defined in notebook 07_diagnose_your_own_run."""
    per = costs(run)
    mine = sum(c[cause] for c in per)
    return mine / max(1e-12, sum(x for c in per for k, x in c.items() if k != cause))


def coverage(rank: Rank) -> float:
    """(steps + named work outside them) / wall: the share of the rank's time the timer's marks explain.
    Defined in notebook 07_diagnose_your_own_run."""
    a = rank.account
    return (a["steps"] + sum(a["outside"].values())) / a["wall"] if a and a["wall"] > 0 else 0.0


def busy_share(run: Run) -> tuple[float, int] | None:
    """The GPU's busy share over the traced steps of the run's profiler trace, and how many steps it holds
    (None without a trace). Defined in notebook 07_diagnose_your_own_run."""
    steps = run.gpu_busy()
    if not steps:
        return None
    return sum(s["busy_s"] for s in steps) / sum(s["span_s"] for s in steps), len(steps)


def first_and_median_stall(rank: Rank) -> tuple[float, float]:
    """The data wait of the first step (it waits for the loader's start) and the median of the others.
    Defined in notebook 07_diagnose_your_own_run."""
    stalls = [s.get("data_stall", s.get("data", 0.0)) for s in rank.steps()]
    return stalls[0], statistics.median(stalls[1:])


def with_passes(run: Run) -> Run:
    """`run` with each epoch's first step (`pass_starts`) taken from the worker's epochs where its timer did not
    record them (records made before it did), so `diagnose(run, epochs=N)` pays the loader's start once.
    Defined in notebook 07_diagnose_your_own_run."""
    values = []
    for rank in run:
        timer = dict(rank.timer)
        if not timer.get("pass_starts"):
            epochs = Result.of(rank).epochs
            timer.update(pass_starts=[e.first_step for e in epochs], data_passes=len(epochs))
        values.append(dict(rank.value, timer=timer))
    return Run(values, run.name, run.record, run.setup, run.round, run.trace)
