"""Reading case 1's results: per-rank rows, epoch spans, throughput. Plain
functions of what `case1.train` returns. Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import statistics

from ...tool.runs import Rank


def by_run(results: list[list[dict]]) -> list[list[dict]]:
    """Turn launch(train_many, ...)'s per-rank lists into per-run lists of ranks.
    Defined in notebook 02_case1_answer."""
    return [list(ranks) for ranks in zip(*results, strict=True)]


def per_rank(results: list[dict], skip: int = 2) -> list[dict]:
    """One row per rank: samples, steps, all-reduce calls and bytes per step,
    median step time and its parts (s), epoch times (s). For tables and checks.
    Defined in notebook 01_case1_broken."""
    rows = []
    for r in results:
        steps = r["timer"]["steps"]
        m = Rank(r).median_step(skip) if steps else {}
        later = steps[skip:] or steps
        rows.append({"rank": r["rank"], "samples": sum(e["samples"] for e in r["epochs"]),
                     "steps": sum(e["steps"] for e in r["epochs"]),
                     "steps_per_epoch": r["steps_per_epoch"], "batch_size": r["batch_size"],
                     "allreduce_calls": sorted({s["allreduce_calls"] for s in later}),
                     "allreduce_bytes": sorted({s["allreduce_bytes"] for s in later}),
                     "grad_bytes": r["grad_bytes"], **{k: m.get(k, 0.0) for k in
                     ("step_time", "data", "forward", "backward", "optimizer", "allreduce", "exposed")},
                     "epoch_posted": [e["time_posted"] for e in r["epochs"]],
                     "epoch_synced": [e["time_synced"] for e in r["epochs"]]})
    return rows


def epoch_span(results: list[dict]) -> list[float]:
    """Per epoch: from the first rank's start to the last rank's end (one host's clock)."""
    n = len(results[0]["epochs"])
    return [max(r["epochs"][e]["t_end"] for r in results) - min(r["epochs"][e]["t_start"] for r in results)
            for e in range(n)]


def throughput(results: list[dict], skip: int = 2) -> float:
    """Samples per second of the whole job in steady state: the sum over ranks of
    per-rank batch / median step time (leaves out warm-up steps)."""
    return sum(r["batch_size"] / Rank(r).median_step(skip)["step_time"] for r in results)


def epoch_boundary(results: list[dict]) -> list[dict]:
    """Per rank of a 2-epoch `case1.train` run: eval_time of epoch 0,
    first_allreduce and first_data (loader restart) of epoch 1's first step,
    usual_allreduce and usual_data (the other steps after the warm-up). Defined in notebook 01_case1_broken."""
    rows = []
    for r in results:
        per, steps = r["steps_per_epoch"], r["timer"]["steps"]
        others = steps[2:per] + steps[per + 1:]
        rows.append({"rank": r["rank"], "eval_time": r["epochs"][0]["eval_time"],
                     "first_allreduce": steps[per].get("allreduce", 0.0), "first_data": steps[per]["data"],
                     "usual_allreduce": [s.get("allreduce", 0.0) for s in others],
                     "usual_data": statistics.median(s["data"] for s in others)})
    return rows




def unused_from_error(text: str) -> list[str]:
    """The parameter names DDP's reduction error lists as having received no gradient (printed when
    TORCH_DISTRIBUTED_DEBUG is INFO or DETAIL; empty when it is OFF). Defined in notebook 02_case1_answer."""
    import re
    m = re.search(r"Parameters which did not receive grad for rank \d+: (.*)", text)
    return [n.strip() for n in m.group(1).split(",")] if m else []
