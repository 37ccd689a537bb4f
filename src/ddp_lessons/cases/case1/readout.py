"""Reading case 1's results: per-rank rows, the split, the evaluation's wait, and the recorded GPU
rounds (`data/runs/case1-h200-*.json`) as printed readings with their provenance. Plain functions of
what `case1.train` returns or a record holds. Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from ...tool import records
from ...tool.runs import Rank, Step, read, timer_of
from ...tool.spread import STEADY_IQR, chance_level, quartiles, summary


@dataclass(frozen=True)
class Epoch:
    """One epoch of one rank as `train` returns it: its samples, steps and training questions (`qids`), its
    time by the post's clock and synchronised, the evaluation's counts (None where the rank did not
    evaluate) and seconds. None where the result has no such key."""
    samples: int | None = None
    steps: int | None = None
    qids: list | None = None
    time_posted: float | None = None
    time_synced: float | None = None
    eval: dict | None = None
    eval_time: float | None = None


@dataclass(frozen=True)
class Result:
    """What one rank of `train` returned, read once: its own keys (`epochs` as `Epoch`s) and its timed
    steps (`Step`s; none where it holds no timer's result). None where the result has no such key."""
    rank: int | None = None
    batch_size: int | None = None
    steps_per_epoch: int | None = None
    grad_bytes: int | None = None
    lr_peak: float | None = None
    max_memory_bytes: int | None = None
    epochs: list[Epoch] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)

    @classmethod
    def of(cls, value) -> Result:
        """`value`: one rank's dict, or its `Rank`."""
        rank = value if isinstance(value, Rank) else Rank(value) if timer_of(value) is not None else None
        own = value if rank is None else rank.value
        return read(cls, {**own, "steps": rank.steps() if rank else []},
                    epochs=lambda epochs: [read(Epoch, e) for e in epochs])


def by_run(results: list[list[dict]]) -> list[list[dict]]:
    """Turn launch(train_many, ...)'s per-rank lists into per-run lists of ranks.
    Defined in notebook 02_case1_answer."""
    return [list(ranks) for ranks in zip(*results, strict=True)]


def per_rank(results: list[dict], skip: int = 2) -> list[dict]:
    """One row per rank: samples, steps, all-reduce calls and bytes per step,
    median step time and its parts (s), epoch times (s). For tables and checks.
    Defined in notebook 01_case1_broken."""
    rows = []
    for value in results:
        rank = Rank(value)
        r = Result.of(rank)
        m = rank.median_step(skip) if r.steps else {}
        later = r.steps[skip:] or r.steps
        rows.append({"rank": r.rank, "samples": sum(e.samples for e in r.epochs),
                     "steps": sum(e.steps for e in r.epochs),
                     "steps_per_epoch": r.steps_per_epoch, "batch_size": r.batch_size,
                     "allreduce_calls": sorted({s.allreduce_calls for s in later}),
                     "allreduce_bytes": sorted({s.allreduce_bytes for s in later}),
                     "grad_bytes": r.grad_bytes, **{k: m.get(k, 0.0) for k in
                     ("step_time", "data", "forward", "backward", "optimizer", "allreduce", "exposed")},
                     "epoch_posted": [e.time_posted for e in r.epochs],
                     "epoch_synced": [e.time_synced for e in r.epochs]})
    return rows


def split(results: list[dict], epoch: int = 0) -> dict:
    """Which training questions each rank saw in `epoch`: per rank, the shared (on two ranks or more)
    and the distinct count. Defined in notebook 01_case1_broken."""
    sets = [set(Result.of(r).epochs[epoch].qids) for r in results]
    shared = sum(len(a & b) for i, a in enumerate(sets) for b in sets[i + 1:])
    return {"per_rank": [len(s) for s in sets], "shared": shared, "distinct": len(set().union(*sets))}


def evaluated(results: list[dict], epoch: int = 0) -> list[int | None]:
    """Per rank, the test questions its evaluation of `epoch` counted (summed over the ranks where it is
    distributed); None where the rank did not evaluate. Defined in notebook 03_case1_beyond."""
    return [(Result.of(r).epochs[epoch].eval or {}).get("n") for r in results]


def epoch_boundary(results: list[dict]) -> list[dict]:
    """Per rank of a 2-epoch `case1.train` run: eval_time of epoch 0,
    first_allreduce and first_data (loader restart) of epoch 1's first step,
    usual_allreduce and usual_data (the other steps after the warm-up). Defined in notebook 01_case1_broken."""
    rows = []
    for value in results:
        r = Result.of(value)
        per, steps = r.steps_per_epoch, r.steps
        others = steps[2:per] + steps[per + 1:]
        rows.append({"rank": r.rank, "eval_time": r.epochs[0].eval_time,
                     "first_allreduce": steps[per].get("allreduce", 0.0), "first_data": steps[per].data,
                     "usual_allreduce": [s.get("allreduce", 0.0) for s in others],
                     "usual_data": statistics.median(s.data for s in others)})
    return rows


def evaluation_wait(rows: list[dict], evaluator: int = 0, other: int = 1) -> tuple[float, float]:
    """How much of rank `evaluator`'s evaluation rank `other` sat out in its first all-reduce of the
    next epoch, as an interval: (other's first all-reduce - evaluator's - the loader restarts'
    difference) / the evaluation, +- the larger median ordinary all-reduce (which already holds one
    rank's wait for the other's backward). `rows`: `epoch_boundary`. Defined in notebook 01_case1_broken."""
    e, o = rows[evaluator], rows[other]
    if e["eval_time"] <= 0:
        raise ValueError(f"rank {evaluator} did not evaluate (eval_time {e['eval_time']}): pass the evaluating rank")
    margin = max(quartiles(r["usual_allreduce"])[1] for r in rows)
    excess = o["first_allreduce"] - e["first_allreduce"] - (e["first_data"] - o["first_data"])
    return (excess - margin) / e["eval_time"], (excess + margin) / e["eval_time"]


def core_share(workers: int, threads: int, cores: int, ranks: int) -> str:
    """A rank's loader workers plus intra-op threads against its share of the cores, as one line.
    A count, not a load: a worker sleeps once `prefetch_factor` batches wait in its queue, so more
    workers than cores only double-book them while the workers are busy. Defined in notebook 02_case1_answer."""
    share = max(1, cores // max(1, ranks))
    verb = "may double-book them when the workers are busy" if workers + threads > share else "fits them"
    return (f"{workers} loader workers + {threads} intra-op thread(s) per rank against {cores} // {ranks} = "
            f"{share} core(s) per rank: {verb}")


def unused_from_error(text: str) -> list[str]:
    """The parameter names DDP's reduction error lists as having received no gradient (printed when
    TORCH_DISTRIBUTED_DEBUG is INFO or DETAIL; empty when it is OFF). Defined in notebook 02_case1_answer."""
    m = re.search(r"Parameters which did not receive grad for rank \d+: (.*)", text)
    return [n.strip() for n in m.group(1).split(",")] if m else []


# -- records: where they come from, and the recorded rounds as readings ----------------------------
def record(name: str) -> dict:
    """A record of `data/runs` by name. Defined in notebook 02_case1_answer."""
    return records.load(name)


def record_line(rec: dict) -> str:
    """The hardware, versions and provenance of a record in one line (`records.describe_machine`: its
    commit or that it names none, an uncommitted tree, a torch other than the one reading it).
    Defined in notebook 01_case1_broken."""
    return records.describe_machine(rec)


@dataclass(frozen=True)
class PairsRun:
    """One run of a pairs record (`benchmarks/record_gpu_pairs.py`): its variant (`name`), its `round`,
    whether it ran (`ok`), its step times, how many of them are warm-up (`skip`) and its median step's
    parts (s). `median` and `iqr_rel`: of its steps after the warm-up."""
    name: str
    round: int
    ok: bool
    skip: int
    step_times: list
    parts: dict
    median = property(lambda self: summary(self.step_times[self.skip:])["median"])
    iqr_rel = property(lambda self: summary(self.step_times[self.skip:])["iqr_rel"])


def _pairs(rec: dict) -> list[PairsRun]:
    return [read(PairsRun, r) for r in rec["results"]["runs"]]


def _runs(rec: dict, name: str) -> list[PairsRun]:
    runs = [r for r in _pairs(rec) if r.name == name]
    if not runs:
        names = sorted({r.name for r in _pairs(rec)})
        raise KeyError(f"no runs named {name!r} in the record: use one of {names}")
    return runs


def round_medians(rec: dict, name: str) -> list[float | None]:
    """Per round (0, 1, ...), the variant's median step time (s); None where the run failed."""
    out = [None] * rec["results"]["rounds_done"]
    for r in _runs(rec, name):
        out[r.round] = r.median if r.ok else None
    return out


def ratios(rec: dict, a: str, b: str) -> list[float]:
    """Per round, B's median step over A's (rounds where both ran). Defined in notebook 02_case1_answer."""
    return [y / x for x, y in zip(round_medians(rec, a), round_medians(rec, b), strict=True)
            if x is not None and y is not None]


def paired(rec: dict, a: str, b: str) -> str:
    """B against A over the record's rounds, as a reading: the per-round ratios, and what a sign test
    makes of them (all on one side: its chance level; 7 rounds or more are needed below 2%).
    Defined in notebook 02_case1_answer."""
    r = ratios(rec, a, b)
    side = "all below 1" if max(r) < 1 else "all above 1" if min(r) > 1 else "on both sides of 1"
    test = (f"a sign test puts {chance_level(len(r)):.1%} on that by chance"
            if side != "on both sides of 1" else "no difference resolved")
    return f"{b} / {a} per round {min(r):.2f} .. {max(r):.2f} over {len(r)} rounds, {side}: {test}"


def unsteady(rec: dict, names=None, limit: float = STEADY_IQR) -> list[tuple[str, int, float]]:
    """(variant, round, IQR / median) of every run (of `names`, default all) whose steps after the
    warm-up are not steady (IQR above `limit`, by default 5% of their median). Defined in notebook 02_case1_answer."""
    rels = [(r.name, r.round, r.iqr_rel) for r in _pairs(rec) if names is None or r.name in names]
    return [row for row in rels if row[2] > limit]


def iqr_rels(rec: dict, name: str) -> list[float]:
    """Per round, the variant's steps' IQR / median after warm-up. Defined in notebook 03_case1_beyond."""
    return [r.iqr_rel for r in _runs(rec, name) if r.ok]


def data_wait_share(rec: dict, name: str) -> list[float]:
    """Per round, the variant's median data wait over its median step. Defined in notebook 03_case1_beyond."""
    return [r.parts["data"] / r.median for r in _runs(rec, name)]
