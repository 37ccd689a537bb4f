"""Setups of case 2 timed in the same interleaved rounds (`spread.interleave`: A B, B A, B A, A B, ...),
so that a slow moment of the machine hits them alike: the loader's data drawn per item or made once
(`randn_vs_tensors`), `self.log` and the logger's flush (`logging_rounds`), any setups (`interleaved`),
and each epoch's loader start (`first_batch_waits`). Defined in notebook 05_case2_where_time_goes.
"""

from __future__ import annotations

import statistics
import time

from torch.utils.data import DataLoader

from ...tool import spread
from ...tool.runs import Rank
from .lightning import fit_here
from .model import make_dataset


def interleaved(setups: dict, rounds: int) -> dict:
    """Run every setup (name -> function returning a value) once per round, in the interleaved order:
    {name: [value per round]} plus 'order'. Defined in notebook 06_case2_breakeven."""
    out = {name: [] for name in setups}
    order = spread.interleave(list(setups), rounds)
    for row in order:
        for name in row:
            out[name].append(setups[name]())
    out["order"] = order
    return out


def loader_pass(opts) -> float:
    """Seconds for one pass over the case's DataLoader (batch `opts.batch_size`): the data alone."""
    loader = DataLoader(make_dataset(opts), batch_size=opts.batch_size)
    t0 = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - t0


def randn_vs_tensors(opts, rounds: int = 7, passes: int = 9) -> dict:
    """A loader pass per round and setup: 'randn' drawn in `__getitem__` (as posted) and 'tensors' made
    once. A round's value is the median of `passes` passes, the two setups' passes alternating inside the
    round. Defined in notebook 05_case2_where_time_goes."""
    posted, made = opts.replace(randn_in_getitem=True), opts.replace(randn_in_getitem=False)

    def one_round():
        tries = [(loader_pass(posted), loader_pass(made)) for _ in range(passes)]
        return statistics.median(a for a, _ in tries), statistics.median(b for _, b in tries)
    got = [one_round() for _ in range(rounds)]
    return {"randn": [a for a, _ in got], "tensors": [b for _, b in got]}


LOGGING = {"posted": dict(log_every_step=True, flush_every=50),     # self.log every step, Lightning's flush
           "log rarely": dict(log_every_step=False, flush_every=50),  # self.log every 50th step
           "flush every step": dict(log_every_step=True, flush_every=1)}


def logging_rounds(opts, accelerator: str = "cpu", rounds: int = 7) -> dict:
    """Per round and setup of `LOGGING`, one fit in this process: its fastest `training_step` (the model,
    the loss, `self.log`), its median micro-step, the logger's flushes and the seconds inside them.
    The fastest training_step, not the median: a step of ~2 ms either runs whole or loses its core.
    Defined in notebook 05_case2_where_time_goes."""
    def one(setup):
        kw = LOGGING[setup]
        got = fit_here(opts.replace(log_every_step=kw["log_every_step"]), accelerator=accelerator,
                       flush_every=kw["flush_every"])
        rank = Rank(got)
        return {"training_step": min(s.forward for s in rank.steps(skip=2)),
                "step": rank.median("step_time"), "flushes": got["log_rows"], "flush_s": got["flush_s"],
                "steps": len(rank.steps())}
    return interleaved({name: (lambda n=name: one(n)) for name in LOGGING}, rounds)


def first_batch_waits(opts, persistent: bool, epochs: int = 3, workers: int = 1) -> list[float]:
    """Per epoch, seconds until the first batch of the case's loader comes out with `workers` loader
    processes, kept between epochs (`persistent_workers=True`) or started again every epoch (the
    default). Defined in notebook 05_case2_where_time_goes."""
    loader = DataLoader(make_dataset(opts), batch_size=opts.batch_size, num_workers=workers,
                        persistent_workers=persistent)
    waits = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        for i, _batch in enumerate(loader):
            if i == 0:
                waits.append(time.perf_counter() - t0)
    return waits
