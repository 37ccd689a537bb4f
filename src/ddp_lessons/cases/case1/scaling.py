"""1 worker against 2, in interleaved rounds: the step and the scaling efficiency of case 1's loop.

One run of each is not a comparison (a run that meets a busy moment of the
machine decides it): `rounds` launches short runs of the same options on 1
and on 2 workers, alternating (1, 2, 2, 1, 1, 2, ...), each worker on one
core, and keeps per round each run's median step after the warm-up (for 2
workers, the slower rank's: the epoch waits for it). Defined in notebook
01_case1_broken; notebook 03 reads the fixed setup with it.
"""

from __future__ import annotations

from ...tool.launcher import launch
from ...tool.spread import interleave
from ...tool.runs import Rank
from .options import Options
from .train import train

SHORT = dict(steps_limit=8, evaluation="none", num_workers=0)  # 6 steps after the 2 warm-up steps


def rounds(options: Options, backend: str, n: int = 5, **short) -> dict:
    """`n` interleaved rounds of `options` (shortened by SHORT, or `short`) on 1 and 2 workers:
    {"1 worker": [median step s per round], "2 workers": [...], "batch": (per-rank batch on 1, on 2)}.
    Defined in notebook 01_case1_broken."""
    o = options.replace(**{**SHORT, **short})
    out, batch = {"1 worker": [], "2 workers": []}, {}
    for order in interleave(["1 worker", "2 workers"], n):
        for name in order:
            world = 1 if name == "1 worker" else 2
            res = launch(train, (o, None, 1), world_size=world, backend=backend, threads=1)
            out[name].append(max(Rank(r).median_step(2)["step_time"] for r in res))
            batch[name] = res[0]["batch_size"]
    return {**out, "batch": (batch["1 worker"], batch["2 workers"])}


def efficiency(r: dict) -> list[float]:
    """Per round: 2-worker throughput over twice the 1-worker throughput (1.0: perfect scaling).
    Defined in notebook 03_case1_beyond."""
    b1, b2 = r["batch"]
    return [(2 * b2 / t2) / (2 * b1 / t1) for t1, t2 in zip(r["1 worker"], r["2 workers"], strict=True)]
