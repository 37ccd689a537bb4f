"""What-if: a run's step on N GPUs over a given link, from one recorded run (a model).

`whatif(run, link, world_size)` replays every step's buckets, as the timer
recorded them (mode "full"), through a link of the table (`links.LINKS`) or
one fitted on your machine, and returns a `Prediction` that prints its
numbers and its assumptions. Modules: `links` (the table, a fit as a link),
`replay` (the arithmetic), `report` (text), `plot` (one replayed step),
`cli` (`python -m ddp_lessons whatif RECORD --link NAME --nproc N`).
(The README, "What-if", introduces it; notebook 03 uses it for case 1's gap (`cases.case1.gap`).)
"""

from __future__ import annotations

from .links import LINKS, Link, from_fit, resolve
from .replay import Prediction, Step, replay_step
from ..runs import timer_of
from .report import table_text

__all__ = ["whatif", "whatif_table", "Link", "LINKS", "from_fit", "Prediction", "Step", "replay_step",
           "table_text"]

NO_BUCKETS = ("{what} has no per-bucket ready times: time the run with StepTimer in mode 'full' (the "
              "default on CPUs; on a GPU pass mode='full' or hook=...), which keeps each bucket's")


def _ranks(run) -> tuple[str, list, dict]:
    """(a name for it, the per-rank results, the record's config) of a record name, path,
    loaded record, or what `launch` returned."""
    from .. import records
    if isinstance(run, (str, bytes)) or hasattr(run, "__fspath__"):
        name, run = str(run), records.load(run)
    else:
        name = "this run"
    config = {}
    if isinstance(run, dict) and "results" in run:
        config, run = run.get("config") or {}, run["results"]
    if isinstance(run, dict) and "ranks" in run:
        run = run["ranks"]
    if isinstance(run, dict):
        run = [run]
    return name, list(run), config


def _timer(rank: dict) -> dict:
    return timer_of(rank) or rank


def _steps(timer: dict, warmup: int, what: str) -> list:
    steps = timer.get("steps") or []
    if not any(s.get("buckets") for s in steps):
        raise ValueError(NO_BUCKETS.format(what=what) + " ready time and size")
    kept = [s for s in steps[warmup:] if s.get("buckets")]
    if not kept:
        raise ValueError(f"{what}: no step after the {warmup} warm-up steps has buckets: record more steps")
    return kept


def whatif(run, link="pcie4-x16", world_size: int = 2, *, rank: int = 0, compute_factor: float = 1.0,
           warmup: int = 2) -> Prediction:
    """Predict `run`'s step on `world_size` ranks over `link` (a row name of `LINKS`, a `Link`,
    or an all-reduce fit with its world_size) from the buckets rank `rank` recorded.
    `compute_factor` multiplies compute (communication kernels slowing it); the first
    `warmup` steps are left out (DDP rebuilds its buckets after the first). A model:
    printing the result prints what it assumes."""
    if world_size < 1:
        raise ValueError(f"world_size={world_size}: use 1 or more ranks")
    if not compute_factor > 0:
        raise ValueError(f"compute_factor={compute_factor}: use a positive factor (1: no slowdown)")
    link = resolve(link)
    link.check(world_size)  # before any work
    name, ranks, _ = _ranks(run)
    if not 0 <= rank < len(ranks):
        raise ValueError(f"rank={rank}: the run has ranks 0..{len(ranks) - 1}")
    steps = _steps(_timer(ranks[rank]), warmup, name)
    per_epoch = ranks[rank].get("steps_per_epoch") or len(_timer(ranks[rank])["steps"])
    replayed = [replay_step(s, link, world_size, compute_factor) for s in steps]
    return Prediction(name, link, world_size, replayed, per_epoch, compute_factor)


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
