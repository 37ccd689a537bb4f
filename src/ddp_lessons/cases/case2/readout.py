"""Case 2's readings: what the workers and the records return, as numbers. A record's line with its
provenance (`record_line`); the launch records' rounds (`runs_of`, `launch_rounds`); an epoch's length
and what N ranks save over the post's 200 epochs (`epoch_seconds`, `payback`); the recorded pairs' and
levers' per-round values (`per_round`, `recorded_medians`) and their one-line spreads.
Defined in notebook 04_case2_lightning.
"""

from __future__ import annotations

import math
import statistics

from ...tool import records
from ...tool.runs import Rank
from .launch_cost import launch_s, parts

POST_EPOCHS = 200  # the post's max_epochs


def record(name: str) -> dict:
    """The run record `name` (`ddp_lessons.tool.records.load`: ./runs, then the course's data/runs).
    Defined in notebook 04_case2_lightning."""
    return records.load(name)


def multi_gpu_records(min_gpus: int = 2) -> list[str]:
    """Names of the case-2 records (kind 'case2...') made on a machine with `min_gpus` GPUs or more.
    Defined in notebook 06_case2_breakeven."""
    return [n for n in records.list_records() if (r := records.load(n))["kind"].startswith("case2")
            and len(r["machine"].get("gpus") or []) >= min_gpus]


def record_line(rec: dict) -> str:
    """The record's machine, versions and provenance (commit, an uncommitted tree, a torch other than
    this one's): `records.describe_machine`. Defined in notebook 04_case2_lightning."""
    return records.describe_machine(rec)


def runs_of(rec: dict, setup: str) -> list[dict]:
    """The launches of `setup` in a `case2-launch` record, in round order. Defined in notebook 04_case2_lightning."""
    return sorted((r for r in rec["results"]["runs"] if r["setup"] == setup), key=lambda r: r["round"])


def launch_rounds(rec: dict, setup: str) -> list[float]:
    """Per round, the launch apart from the epochs (s) of `setup` in a `case2-launch` record.
    Defined in notebook 04_case2_lightning."""
    return [launch_s(r) for r in runs_of(rec, setup)]


def launch_parts(rec: dict, setup: str) -> dict:
    """The median over rounds of each of rank 0's parts (s) of `setup` in a `case2-launch` record.
    Defined in notebook 04_case2_lightning."""
    runs = [parts(r) for r in runs_of(rec, setup)]
    return {k: statistics.median(p[k] for p in runs) for k in runs[0]}


def load_range(rec: dict) -> tuple[float, float]:
    """The lowest and highest 1-minute load seen before and after the record's launches.
    Defined in notebook 04_case2_lightning."""
    loads = [x for r in rec["results"]["runs"] for x in (r["load_before"], r["load_after"])]
    return min(loads), max(loads)


def epoch_seconds(result) -> list[float]:
    """Each epoch's length (training pass + validation pass, s) of one rank's Lightning timer, leaving
    out the first (it starts the loaders and warms up). Defined in notebook 05_case2_where_time_goes."""
    timer = Rank(result).timer
    return [e["train"] + e["validation"] for e in timer["epochs"][1:]]


def payback(extra_launch_s: float, one_epoch_s: float, n_epoch_s: float, epochs: int = POST_EPOCHS) -> dict:
    """A model: a run pays its launch once, then `epochs` epochs. Seconds N ranks save per epoch
    (negative: they lose), over the run, what is left once their extra launch is paid (`net`, positive:
    N ranks win) and the epoch count at which they break even. Defined in notebook 05_case2_where_time_goes."""
    saved = one_epoch_s - n_epoch_s
    return {"per_epoch": saved, "over_run": saved * epochs, "net": saved * epochs - extra_launch_s,
            "epochs": epochs, "breakeven_epochs": extra_launch_s / saved if saved > 0 else math.inf}


def spread_line(values, scale: float = 1e3, unit: str = "ms", over: str = "rounds") -> str:
    """'median m (min .. max over n rounds)' of the values there are (None: a round that did not run).
    Defined in notebook 04_case2_lightning."""
    v = [x * scale for x in values if x is not None]
    return (f"median {statistics.median(v):.2f} {unit} ({min(v):.2f} .. {max(v):.2f} over {len(v)} {over})"
            if v else f"no {over}")


def ratio_line(a, b, label: str) -> str:
    """'label lo .. hi (n rounds)' of the per-round ratios b / a (rounds where both ran).
    Defined in notebook 04_case2_lightning."""
    r = [y / x for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    return f"{label} {min(r):.2f} .. {max(r):.2f} ({len(r)} rounds)" if r else f"{label}: no paired round"


KEYS = {"step": "median micro-step", "training_step": "median training_step", "wall": "fit time"}


def per_round(rec: dict, name: str, key: str) -> list[float | None]:
    """Variant `name`'s value in each round of a pairs record, in round order (None: a failed run).
    `key`: 'step' (its median micro-step after warm-up), 'training_step' (median of the forward phase:
    the model, the loss, self.log, the NVML block when on) or 'wall' (trainer.fit, s).
    Defined in notebook 05_case2_where_time_goes."""
    if key not in KEYS:
        raise ValueError(f"key={key!r}: use one of {sorted(KEYS)}")
    runs = [r for r in rec["results"]["runs"] if r["name"] == name]
    if not runs:
        names = sorted({r["name"] for r in rec["results"]["runs"]})
        raise ValueError(f"no variant {name!r} in this record: it has {names}")
    out = [None] * (1 + max(r["round"] for r in runs))
    for r in runs:
        if r.get("ok"):
            out[r["round"]] = (r["summary"]["median"] if key == "step" else
                               r["parts"]["forward"] if key == "training_step" else r["wall"])
    return out


def recorded_medians(rec: dict, name: str) -> list:
    """Per-round median step times (s) of `name` in a pairs record (`runs` rows) or a levers record
    (`levers[name]['rounds']`), or in their results; None for a missed round. Defined in notebook 04_case2_lightning."""
    results = rec.get("results", rec)
    if "levers" in results:
        rows = results["levers"].get(name, {}).get("rounds", [])
    else:
        rows = [r for r in results["runs"] if r["name"] == name and r["ok"]]
    got = {r["round"]: (r["median"] if "median" in r else r["summary"]["median"]) for r in rows}
    return [got.get(i) for i in range(results["rounds_done"])]


def expected_syncs(samples_per_rank: int, batch_size: int, accumulate: int) -> tuple[int, int]:
    """(micro-steps, optimizer steps) per epoch and rank: Lightning steps on every `accumulate`-th
    micro-step and on the epoch's last one. Defined in notebook 05_case2_where_time_goes."""
    micro = math.ceil(samples_per_rank / batch_size)
    return micro, math.ceil(micro / accumulate)
