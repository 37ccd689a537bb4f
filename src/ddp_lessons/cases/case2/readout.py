"""Case 2's readings: what the workers and the records return, as numbers. A record's line with its
provenance (`record_line`); the launch records' rounds (`runs_of`, `extra_launch`, `mpi_singletons`); an
epoch's length and what N ranks save over the post's 200 epochs (`epoch_seconds`, `payback`,
`breakeven_share`); the one-GPU epoch taken apart and the 3-GPU epoch modelled from its parts
(`epoch_split`: case 2's answer); the recorded pairs' and levers' per-round values (`per_round`,
`recorded_medians`) and their one-line spreads. Defined in notebook 04_case2_lightning.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass

from ...tool import allreduce, records
from ...tool.runs import Rank, Record, read
from .launch_cost import EPOCHS, Launch, launch_s, parts
from .options import Options

POST_EPOCHS = 200  # the post's max_epochs


def record(name: str) -> dict:
    """The run record `name` (`ddp_lessons.tool.records.load`: ./runs, then the course's data/runs).
    Defined in notebook 04_case2_lightning."""
    return records.load(name)


def multi_gpu_records(min_gpus: int = 2) -> list[str]:
    """Names of the case-2 records (kind 'case2...') made on a machine with `min_gpus` GPUs or more.
    Defined in notebook 06_case2_breakeven."""
    return [n for n in records.list_records() if (r := Record(records.load(n), n)).kind.startswith("case2")
            and len(r.machine.get("gpus") or []) >= min_gpus]


def record_line(rec: dict) -> str:
    """The record's machine, versions and provenance (commit, an uncommitted tree, a torch other than
    this one's): `records.describe_machine`. Defined in notebook 04_case2_lightning."""
    return records.describe_machine(rec)


def runs_of(rec: dict, setup: str) -> list[dict]:
    """The launches of `setup` in a `case2-launch` record, in round order. Defined in notebook 04_case2_lightning."""
    runs = [r for r in rec["results"]["runs"] if Launch.of(r).setup == setup]
    return sorted(runs, key=lambda r: Launch.of(r).round)


def launch_rounds(rec: dict, setup: str) -> list[float]:
    """Per round, the launch apart from the epochs (s) of `setup` in a `case2-launch` record.
    Defined in notebook 04_case2_lightning."""
    return [launch_s(r) for r in runs_of(rec, setup)]


def extra_launch(rec: dict, one: str = "cpu:1:auto", many: str = "cpu:3:ddp") -> list[float]:
    """Per round, the launch of `many` beyond that of `one` (s) in a `case2-launch` record: what the extra
    ranks cost apart from the epochs. Defined in notebook 04_case2_lightning."""
    return [b - a for a, b in zip(launch_rounds(rec, one), launch_rounds(rec, many), strict=True)]


def launch_parts(rec: dict, setup: str) -> dict:
    """The median over rounds of each of rank 0's parts (s) of `setup` in a `case2-launch` record.
    Defined in notebook 04_case2_lightning."""
    runs = [parts(r) for r in runs_of(rec, setup)]
    return {k: statistics.median(p[k] for p in runs) for k in runs[0]}


def load_range(rec: dict) -> tuple[float, float]:
    """The lowest and highest 1-minute load seen before and after the record's launches.
    Defined in notebook 04_case2_lightning."""
    loads = [x for r in map(Launch.of, rec["results"]["runs"]) for x in (r.load_before, r.load_after)]
    return min(loads), max(loads)


def mpi_singletons(rec: dict, setup: str) -> tuple[int, int]:
    """(ranks that started an OpenMPI singleton, ranks) over the launches of `setup` in a `case2-launch`
    record: where mpi4py is installed, Lightning's MPI check initialises MPI when the Trainer is built,
    and each rank then runs an `orted --hnp ... --singleton-died-pipe` child. Defined in notebook 04_case2_lightning."""
    ranks = [r for run in runs_of(rec, setup) for r in Launch.of(run).ranks]
    return sum(any("--singleton-died-pipe" in c for c in r.children or []) for r in ranks), len(ranks)


@dataclass(frozen=True)
class Epoch:
    """One epoch of a rank's Lightning timer (`StepTimerCallback`): its training and validation passes (s)."""
    train: float
    validation: float


def timer_epochs(result) -> list[Epoch]:
    """The epochs of one rank's Lightning timer (`fit_here`'s or `fit_worker`'s result, or its `Rank`)."""
    rank = result if isinstance(result, Rank) else Rank(result)
    return [read(Epoch, e) for e in rank.timer["epochs"]]


def epoch_seconds(result) -> list[float]:
    """Each epoch's length (training pass + validation pass, s) of one rank's Lightning timer, leaving
    out the first (it starts the loaders and warms up). Defined in notebook 05_case2_where_time_goes."""
    return [e.train + e.validation for e in timer_epochs(result)[1:]]


def payback(extra_launch_s: float, one_epoch_s: float, n_epoch_s: float, epochs: int = POST_EPOCHS) -> dict:
    """A model: a run pays its launch once, then `epochs` epochs. Seconds N ranks save per epoch
    (negative: they lose), over the run, what is left once their extra launch is paid (`net`, positive:
    N ranks win) and the epoch count at which they break even. Defined in notebook 04_case2_lightning."""
    saved = one_epoch_s - n_epoch_s
    return {"per_epoch": saved, "over_run": saved * epochs, "net": saved * epochs - extra_launch_s,
            "epochs": epochs, "breakeven_epochs": extra_launch_s / saved if saved > 0 else math.inf}


def breakeven_share(extra_launch_s: float, one_epoch_s: float, epochs: int = POST_EPOCHS) -> float:
    """A model: the share of the one-device epoch below which N ranks' epochs pay back their longer launch
    over `epochs` epochs, 1 - extra launch / (epochs x one-device epoch); 0 or less: they cannot win.
    Defined in notebook 04_case2_lightning."""
    return 1 - extra_launch_s / (epochs * one_epoch_s)


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


@dataclass(frozen=True)
class Round:
    """One round of a variant: a row of a pairs record's `runs` (its `name`, whether it ran, `ok`, the
    `summary` of its steps after warm-up, its median `parts` and fit time, `wall`, s) or of a lever's
    `rounds` in a levers record (its `median` step, s)."""
    round: int
    name: str | None = None
    ok: bool | None = None
    median: float | None = None
    summary: dict | None = None
    parts: dict | None = None
    wall: float | None = None

    @property
    def step(self) -> float:
        """Its median step after warm-up (s): the lever round's own, else its summary's."""
        return self.median if self.median is not None else self.summary["median"]


def per_round(rec: dict, name: str, key: str) -> list[float | None]:
    """Variant `name`'s value in each round of a pairs record, in round order (None: a failed run).
    `key`: 'step' (its median micro-step after warm-up), 'training_step' (median of the forward phase:
    the model, the loss, self.log, the NVML block when on) or 'wall' (trainer.fit, s).
    Defined in notebook 05_case2_where_time_goes."""
    if key not in KEYS:
        raise ValueError(f"key={key!r}: use one of {sorted(KEYS)}")
    rows = [read(Round, r) for r in rec["results"]["runs"]]
    runs = [r for r in rows if r.name == name]
    if not runs:
        names = sorted({r.name for r in rows})
        raise ValueError(f"no variant {name!r} in this record: it has {names}")
    out = [None] * (1 + max(r.round for r in runs))
    for r in runs:
        if r.ok:
            out[r.round] = r.step if key == "step" else r.parts["forward"] if key == "training_step" else r.wall
    return out


def recorded_medians(rec: dict, name: str) -> list:
    """Per-round median step times (s) of `name` in a pairs record (`runs` rows) or a levers record
    (`levers[name]['rounds']`), or in their results; None for a missed round. Defined in notebook 04_case2_lightning."""
    results = rec.get("results", rec)
    if "levers" in results:
        rows = [read(Round, r) for r in results["levers"].get(name, {}).get("rounds", [])]
    else:
        rows = [r for r in (read(Round, x) for x in results["runs"]) if r.name == name and r.ok]
    got = {r.round: r.step for r in rows}
    return [got.get(i) for i in range(results["rounds_done"])]


def expected_syncs(samples_per_rank: int, batch_size: int, accumulate: int) -> tuple[int, int]:
    """(micro-steps, optimizer steps) per epoch and rank: Lightning steps on every `accumulate`-th
    micro-step and on the epoch's last one. Defined in notebook 05_case2_where_time_goes."""
    micro = math.ceil(samples_per_rank / batch_size)
    return micro, math.ceil(micro / accumulate)


# -- case 2's answer: the one-GPU epoch taken apart, the n-GPU epoch modelled from its parts ---------
@dataclasses.dataclass(frozen=True)
class EpochSplit:
    """One epoch of the posted test on one GPU taken apart from records, and the same epoch on `n` GPUs
    modelled from its parts (s). Assumptions: each rank runs its `batches[1]` of the `batches[0]`
    micro-steps and validation batches (DistributedSampler's share, the last batch partial) at the one-GPU
    speed; the rest of the epoch (Lightning's loop, checkpoint, progress bar) neither splits nor grows;
    each rank adds DDP's per-step work and `syncs` all-reduces; nothing else grows with the ranks.
    Defined in notebook 04_case2_lightning."""
    one_epoch: float      # the 200-epoch run's epochs / 200: one run
    train: tuple          # per recorded epoch after the first: its micro-steps, summed
    validation: tuple     # per recorded epoch after the first: its validation pass
    batches: tuple        # (batches an epoch on one GPU, on each of n ranks)
    ddp_step: float       # DDP's own work per micro-step, recorded at world size 1
    allreduce: float      # one all-reduce of the gradients on the assumed link
    syncs: int            # all-reduces an epoch on each rank
    n: int = 3

    def n_epoch(self, split: float | None = None) -> float:
        """The n-GPU epoch (s) when the parts that split take `split` s on one GPU (None: their medians)."""
        split = self.one_epoch - self.fixed if split is None else split
        share = self.batches[1] / self.batches[0]
        return self.one_epoch - split * (1 - share) + self.batches[1] * self.ddp_step + self.syncs * self.allreduce

    def splits(self) -> list[float]:
        return [t + v for t, v in zip(self.train, self.validation, strict=True)]

    @property
    def fixed(self) -> float:
        """The rest of the one-GPU epoch, by difference (the parts' record ran without checkpoint or bar)."""
        return self.one_epoch - statistics.median(self.train) - statistics.median(self.validation)

    @property
    def fraction(self) -> float:
        """The n-GPU epoch over the one-GPU epoch, at the parts' medians."""
        return self.n_epoch() / self.one_epoch

    def fraction_range(self) -> tuple[float, float]:
        """The fraction's lowest and highest over the recorded epochs' parts."""
        got = sorted(self.n_epoch(s) / self.one_epoch for s in self.splits())
        return got[0], got[-1]

    def parts(self) -> dict:
        """Part -> (s on one GPU, s on each of n GPUs), the medians; the parts add up to both epochs."""
        share = self.batches[1] / self.batches[0]
        train, val, fixed = statistics.median(self.train), statistics.median(self.validation), self.fixed
        return {f"training micro-steps ({self.batches[0]}; {self.batches[1]} a rank)": (train, train * share),
                "validation pass (split the same way)": (val, val * share),
                "the rest: loop, checkpoint, progress bar": (fixed, fixed),
                "DDP's own work in each micro-step": (0.0, self.batches[1] * self.ddp_step),
                f"{self.syncs} all-reduces of the gradients": (0.0, self.syncs * self.allreduce)}

    def launch_to_lose(self, epochs: int = POST_EPOCHS) -> float:
        """The extra launch (s) at which n GPUs stop winning `epochs` epochs of these lengths."""
        return epochs * (self.one_epoch - self.n_epoch())


def epoch_split(n: int = 3, parts_record: str = "case2-h200-posted", whole: str = "case2-posted200-h200x1",
                levers: str = "case2-h200-levers", busbw: float = 25e9, latency: float = 100e-6) -> EpochSplit:
    """Case 2's one-GPU epoch taken apart: the epoch from `whole` (the post's 200 epochs, one run), its
    micro-steps and validation passes from `parts_record` (5 epochs; the first left out), DDP's per-step
    work from `levers`; the all-reduce on an assumed link (`busbw`, `latency`: the slowest row of notebook
    06's table). Defined in notebook 04_case2_lightning."""
    run = runs_of(record(whole), "gpu:1:auto")[0]
    one_epoch = parts(run)[EPOCHS] / Launch.of(run).epochs
    rec = Record(record(parts_record), parts_record)
    opts, rank = Options(**rec.config["options"]), Rank(rec.results["lightning"][0])
    per_epoch = math.ceil(opts.size / opts.batch_size)
    steps = [s.step_time for s in rank.steps()]
    train = [sum(steps[i:i + per_epoch]) for i in range(per_epoch, len(steps), per_epoch)]
    validation = [e.validation for e in timer_epochs(rank)[1:]]
    per_rank, syncs = expected_syncs(math.ceil(opts.size / n), opts.batch_size, opts.accumulate)
    lev = record(levers)
    ddp, eager = (statistics.median(m for m in recorded_medians(lev, k) if m is not None) for k in ("ddp", "fixed"))
    return EpochSplit(one_epoch=one_epoch, train=tuple(train), validation=tuple(validation),
                      batches=(per_epoch, per_rank), ddp_step=ddp - eager,
                      allreduce=allreduce.estimate(rank["grad_bytes"], busbw, latency, n), syncs=syncs, n=n)
