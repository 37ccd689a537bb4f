"""The knobs workload's command and its interleaved rounds, for doctor_cost.py and planted_knobs.py."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ddp_lessons.tool import spread

WORKLOAD = Path(__file__).resolve().parents[1] / "workloads" / "knobs.py"


def knobs_command(*args: str) -> list[str]:
    """The plain DDP workload on 2 gloo ranks under torchrun, as a user would start it."""
    torchrun = str(Path(sys.executable).parent / "torchrun")
    return [torchrun, "--standalone", "--nproc_per_node", "2", str(WORKLOAD), *args]


def interleaved(names, rounds: int, run_one, key: str = "loop_s", deadline: float | None = None) -> tuple[dict, float]:
    """{name: [run_one(name) per round]} in interleaved order (A B, B A, ...), each round's `key` printed
    as it ends; and the seconds it all took. `deadline` (a time.time()): no round starts past it, so
    every round kept is whole."""
    runs, t0 = {n: [] for n in names}, time.time()
    for r, row in enumerate(spread.interleave(list(names), rounds)):
        if deadline is not None and time.time() > deadline:
            print(f"stopped after {r} rounds: the time budget is spent", flush=True)
            break
        for name in row:
            runs[name].append(run_one(name))
        print(r, {n: v[-1].get(key) and round(v[-1][key], 5) for n, v in runs.items()}, flush=True)
    return runs, time.time() - t0
