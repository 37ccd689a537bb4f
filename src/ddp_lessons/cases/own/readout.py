"""The workload's runs as numbers a lesson compares: per rank and run, where
the wall time went (training steps, evaluation, and inside the steps data
wait, per-step logging, exposed all-reduce), and per setup the repeats.

A run takes as long as its slowest rank (`run_time`). Evaluation is timed
between epochs, outside every step. Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations


def rank_numbers(r: dict) -> dict:
    """One rank's run: wall, train, eval (s), eval's share of train + eval, and
    summed over its steps the data wait, the log phase and exposed all-reduce."""
    steps = r["timer"]["steps"]
    train = sum(e["train_s"] for e in r["epochs"])
    ev = sum(e["eval_s"] for e in r["epochs"])
    return {"rank": r["rank"], "world_size": r["world_size"], "wall_s": r["wall_s"], "train_s": train,
            "eval_s": ev, "eval_share": ev / (train + ev) if train + ev else 0.0,
            "eval_samples": r["epochs"][0].get("eval_samples", 0),
            "data_s": sum(s.get("data", 0.0) for s in steps), "log_s": sum(s.get("log", 0.0) for s in steps),
            "exposed_s": sum(s.get("exposed", 0.0) or 0.0 for s in steps), "steps": len(steps)}


def run_time(ranks: list[dict]) -> float:
    """A run's time: its slowest rank's wall time (the others wait for it at the end)."""
    return max(r["wall_s"] for r in ranks)


def setups(rounds_result: dict) -> dict:
    """`train.rounds`' result as setup -> list (one per round) of per-rank numbers.
    Under `launch`, pass the list of every rank's result. Defined in notebook 07_diagnose_your_own_run."""
    per_rank = rounds_result if isinstance(rounds_result, list) else [rounds_result]
    names = per_rank[0]["runs"]   # rank 0 takes part in every setup
    return {name: [[rank_numbers(rk["runs"][name][i]) for rk in per_rank if len(rk["runs"][name]) > i]
                   for i in range(len(per_rank[0]["runs"][name]))] for name in names}


def times(rounds: list[list[dict]]) -> list[float]:
    """Each round's run time. Defined in notebook 07_diagnose_your_own_run."""
    return [run_time(ranks) for ranks in rounds]


def costs(ranks: list[dict], duplicated: bool) -> list[dict]:
    """Per rank, seconds each avoidable cost took in the run: evaluation done on
    every rank beyond its share (`eval_s * (1 - 1/world)`; 0 when the
    evaluation is split), data wait, per-step logging, exposed all-reduce.
    Defined in notebook 07_diagnose_your_own_run."""
    out = []
    for r in ranks:
        dup = r["eval_s"] * (1 - 1 / r["world_size"]) if duplicated else 0.0
        out.append({"rank": r["rank"], "duplicated evaluation": dup, "data wait": r["data_s"],
                    "per-step logging": r["log_s"], "exposed all-reduce": r["exposed_s"]})
    return out


def ranked(costs_by_rank: list[dict]) -> list[tuple[str, float, float]]:
    """Causes by their largest per-rank cost: (cause, min, max over ranks), largest first.
    Defined in notebook 07_diagnose_your_own_run."""
    causes = [k for k in costs_by_rank[0] if k != "rank"]
    rows = [(c, min(r[c] for r in costs_by_rank), max(r[c] for r in costs_by_rank)) for c in causes]
    return sorted(rows, key=lambda t: -t[2])


def median_steps(rounds: list[list[dict]], raw_runs: list[dict]) -> list[float]:
    """Each round's median step time on rank 0, leaving out each epoch's first step
    (it waits for the loader's start; the step after the first is DDP's bucket rebuild).
    Defined in notebook 07_diagnose_your_own_run."""
    import statistics
    out = []
    for r in raw_runs[:len(rounds)]:
        firsts = {e["first_step"] for e in r["epochs"]} | {e["first_step"] + 1 for e in r["epochs"]}
        out.append(statistics.median(s["step_time"] for s in r["timer"]["steps"] if s["step"] not in firsts))
    return out


def timer_with_passes(run: dict) -> dict:
    """One rank's timer result from `train`'s value, with each epoch's first step (`pass_starts`)
    taken from its epochs where the timer did not record them (records made before it did), so
    `diagnose(..., epochs=N)` can tell the loader's start once per launch from a start every epoch.
    Defined in notebook 07_diagnose_your_own_run."""
    t = dict(run["timer"])
    if not t.get("pass_starts"):
        t.update(pass_starts=[e["first_step"] for e in run["epochs"]], data_passes=len(run["epochs"]))
    return t
