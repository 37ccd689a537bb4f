"""Notebook 00's recorded GPU runs, made again on this machine's GPUs.

`replay.stored_or_live(name, rerun, where)` calls `rerun` where `where`
runs on NCCL: the timer-overhead benchmark (`benchmarks/timing_overhead.py`)
with the record's settings, on `where`'s ranks. Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import statistics

from ...tool import records
from ...tool.launcher import launch
from ...course.timer_validation.overhead import MODES, all_modes


def rerun(rec: dict, where) -> dict:
    """A new record of the overhead run `rec` describes, made on `where`'s ranks."""
    if rec["kind"] != "overhead":
        raise ValueError(f"intro.replay reruns 'overhead' records, not {rec['kind']!r}")
    c = rec["config"]
    out = launch(all_modes, (c["steps"], c["width"], c["depth"], c["batch"], c["rounds"]),
                 world_size=where.world_size, backend=where.backend, timeout=600)
    # As the benchmark: a step is as slow as its slowest rank; medians over rounds.
    times = {m: [max(r[m][i] for r in out) for i in range(c["rounds"])] for m in MODES}
    med = {m: statistics.median(v) for m, v in times.items()}
    config = dict(c, nproc=where.world_size, backend=where.backend, record=None)
    return records.make_record("overhead", config, {"per_round": times, "median": med,
                               "overhead": med["full"] / med["off"] - 1}, backend=where.backend)
