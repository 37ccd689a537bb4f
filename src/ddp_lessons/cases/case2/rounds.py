"""Two setups timed in the same interleaved rounds (`spread.interleave`: A B,
B A, B A, A B, ...), so that a slow moment of the machine hits both alike;
the verdicts in `verdicts` decide from the per-round values.
Defined in notebooks 04_case2_lightning and 05_case2_where_time_goes.
"""

from __future__ import annotations

import statistics
import time

from torch.utils.data import DataLoader

from ...tool import spread
from .lightning import fit_here, fit_one
from .model import make_dataset


def _rounds(setups: dict, rounds: int) -> dict:
    """Run every setup (name -> function returning a number) once per round,
    in the interleaved order; {name: [value per round]} plus 'order'."""
    out = {name: [] for name in setups}
    order = spread.interleave(list(setups), rounds)
    for row in order:
        for name in row:
            out[name].append(setups[name]())
    out["order"] = order
    return out


def _wall(fn, *args, **kwargs) -> float:
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t0


def one_vs_forked(opts, where, rounds: int = 6) -> dict:
    """Seconds from the call to its return, per round: 'one' device
    (`fit_one`: in this process where no GPU is visible; else in one process
    forked by the launcher, so that this kernel never initialises CUDA) and
    `where.world_size` workers 'forked' by Lightning's `ddp_notebook`. Both
    include building the Trainer and Lightning's setup; the forked run also
    forks, joins a process group and tears it down (so does 'one' on a GPU
    machine, with one process); neither starts a Python or imports anything.
    Defined in notebook 04_case2_lightning."""
    def one():
        return _wall(fit_one, opts, where)

    def forked():
        return _wall(fit_here, opts, devices=where.world_size, strategy="ddp_notebook",
                     accelerator=where.accelerator, timed=False)
    return _rounds({"one": one, "forked": forked}, rounds)


def loader_pass(opts) -> float:
    """Seconds for one pass over the case's DataLoader (batch `opts.batch_size`):
    how long the data takes to come out, nothing else."""
    loader = DataLoader(make_dataset(opts), batch_size=opts.batch_size)
    t0 = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - t0


def randn_vs_tensors(opts, rounds: int = 5, passes: int = 9) -> dict:
    """A loader pass per round and setup: 'randn' drawn in `__getitem__` (as
    posted) and 'tensors' made once. A round's value is the median of `passes`
    passes, the two setups' passes alternating inside the round, so that a
    busy moment of the machine (a pass takes tens of ms) hits both alike. The
    median, not the best: single passes of either setup sometimes run far
    faster or slower than the rest (seen on two shared cores). Defined in notebook 05_case2_where_time_goes."""
    posted, made = opts.replace(randn_in_getitem=True), opts.replace(randn_in_getitem=False)

    def one_round():
        tries = [(loader_pass(posted), loader_pass(made)) for _ in range(passes)]
        return statistics.median(a for a, _ in tries), statistics.median(b for _, b in tries)
    pairs = [one_round() for _ in range(rounds)]
    return {"randn": [a for a, _ in pairs], "tensors": [b for _, b in pairs]}


def log_every_vs_rare(opts, accelerator: str = "cpu", rounds: int = 7) -> dict:
    """The fastest `training_step` (seconds, after 2 warm-up steps) of a fit in
    this process per round: self.log on 'every' step and every 50th ('rare').
    The fastest, not the median: a step of ~2 ms either runs whole or loses its
    core, and beside busy processes a fit's median moved by up to 3x from round to
    round (per-round ratios 0.03-2.9 at load 4) while its fastest step held (0.5-0.84).
    Defined in notebook 05_case2_where_time_goes."""
    def step(o):
        return min(s["forward"] for s in fit_here(o, accelerator=accelerator)["timer"]["steps"][2:])
    return _rounds({"every": lambda: step(opts.replace(log_every_step=True)),
                    "rare": lambda: step(opts.replace(log_every_step=False))}, rounds)


def first_batch_waits(opts, persistent: bool, epochs: int = 3, workers: int = 1) -> list[float]:
    """Per epoch, seconds until the first batch of the case's loader comes out with `workers` loader
    processes, kept between epochs (`persistent_workers=True`) or started again every epoch (the
    default): what each epoch's loader start costs. Defined in notebook 05_case2_where_time_goes."""
    loader = DataLoader(make_dataset(opts), batch_size=opts.batch_size, num_workers=workers,
                        persistent_workers=persistent)
    waits = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        for i, _batch in enumerate(loader):
            if i == 0:
                waits.append(time.perf_counter() - t0)
    return waits
