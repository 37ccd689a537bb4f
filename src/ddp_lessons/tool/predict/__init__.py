"""What-if: a run's step on N GPUs over a given link, from one recorded run (a model).

`whatif(run, link, world_size)` replays every step's buckets, as the timer
recorded them (mode "full"), through a link of the table (`links.LINKS`) or
one fitted on your machine, and returns a `Prediction` that prints its
numbers and its assumptions. Modules: `links` (the table, a fit as a link),
`timeline` (the arithmetic: buckets through a link), `report` (text), `plot` (one step's timeline),
`cli` (`python -m ddp_lessons whatif RECORD --link NAME --nproc N`).
(The README, "What-if", introduces it; notebook 03 uses it for case 1's gap (`cases.case1.gap`).)
"""

from __future__ import annotations

from ..runs import Run
from .links import LINKS, Link, from_fit, resolve
from .timeline import Prediction, Step, replay_step
from .report import table_text

__all__ = ["whatif", "whatif_table", "Link", "LINKS", "from_fit", "Prediction", "Step", "replay_step",
           "table_text"]

NO_BUCKETS = ("{what} has no per-bucket ready times: time the run with StepTimer in mode 'full' (the "
              "default on CPUs; on a GPU pass mode='full' or hook=...), which keeps each bucket's")


def _steps(rank, warmup: int, what: str) -> list:
    steps = rank.steps()
    if not any(s.buckets for s in steps):
        raise ValueError(NO_BUCKETS.format(what=what) + " ready time and size")
    kept = [s for s in steps[warmup:] if s.buckets]
    if not kept:
        raise ValueError(f"{what}: no step after the {warmup} warm-up steps has buckets: record more steps")
    return kept


def _run(run, setup, round) -> Run:
    if isinstance(run, (str, bytes)) or hasattr(run, "__fspath__"):
        return Run.load(run, setup, round)
    return run if isinstance(run, Run) else Run(run)


def whatif(run, link="pcie4-x16", world_size: int = 2, *, rank: int = 0, compute_factor: float = 1.0,
           warmup: int = 2, setup: str | None = None, round: int | None = None, epochs: float | None = None,
           iterations: int | None = None) -> Prediction:
    """Predict `run`'s step on `world_size` ranks over `link` (a row name of `LINKS`, a `Link`,
    or an all-reduce fit with its world_size) from the buckets rank `rank` recorded. `run`: what
    `diagnose` takes (a `Run`, the ranks' values, a record's name with `setup`/`round`).
    `compute_factor` multiplies compute (communication kernels slowing it); the first `warmup` steps
    are left out (DDP rebuilds its buckets after the first). `epochs` (passes over the data, as the
    recorded run made them) or `iterations` (optimizer steps): the run length to predict the time of.
    A model: printing the result prints what it assumes, and a CPU run given a GPU link says so."""
    if world_size < 1:
        raise ValueError(f"world_size={world_size}: use 1 or more ranks")
    if not compute_factor > 0:
        raise ValueError(f"compute_factor={compute_factor}: use a positive factor (1: no slowdown)")
    if epochs is not None and iterations is not None:
        raise ValueError("give epochs= or iterations=, not both")
    link = resolve(link)
    link.check(world_size)  # before any work
    r = _run(run, setup, round)
    name = r.name or "this run"
    if not 0 <= rank < len(r):
        raise ValueError(f"rank={rank}: the run has ranks 0..{len(r) - 1}")
    one = r[rank]
    steps = _steps(one, warmup, name)
    recorded_world = r.world_size
    # the recorded rank's steps per pass are already its share of the data: the whole epoch is that
    # many times the recorded world size, split again over `world_size` ranks
    passes = one.data_passes or 1
    per_epoch = (one.get("steps_per_epoch") or len(one.steps()) / passes) * recorded_world
    replayed = [replay_step(s, link, world_size, compute_factor) for s in steps]
    notes = []
    if not one.on_gpu and link.source and not link.name.startswith("fitted"):
        notes.append(f"a CPU run with a GPU link ({link.name}): the compute is this CPU's and the link a GPU "
                     "machine's, a mix of no real machine; pass compute_factor (the GPU's speed against this "
                     "CPU's) or a link fitted here (allreduce.fit_latency_bandwidth) for a machine that exists")
    p = Prediction(name, link, world_size, replayed, per_epoch, compute_factor, recorded_world, notes,
                   epochs, iterations)
    if p.median("efficiency") > 1:
        p.notes.append(f"efficiency above 1: the recorded step's exposed all-reduce "
                       f"({p.median('recorded_exposed') * 1e3:.3g} ms, on {recorded_world} rank(s)) is longer than "
                       f"the link's predicted one ({p.median('exposed') * 1e3:.3g} ms): the prediction swaps it out")
    return p


def whatif_table(run, links=None, world_sizes=(2, 4, 8), **kwargs) -> list[dict]:
    """One row per link and rank count (none beyond what a link joins): median exposed,
    step, efficiency, and the epoch. `table_text(rows)` prints them."""
    rows = []
    for link in links or list(LINKS):
        for n in world_sizes:
            limit = resolve(link).max_ranks
            if limit is not None and n > limit:
                continue  # a bridge of two cards has no row for more ranks
            p = whatif(run, link, n, **kwargs)
            rows.append({"link": p.link.name, "world_size": n, "exposed": p.median("exposed"),
                         "step": p.median("predicted"), "efficiency": p.median("efficiency"),
                         "epoch": p.epoch_predicted})
    return rows
