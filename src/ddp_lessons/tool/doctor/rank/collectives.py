"""The collectives a script calls itself (Lightning's `self.log(sync_dist=True)`, a metric's sync, a
barrier): timed as such, not as the compute they run in. Patched both where scripts call them
(`torch.distributed.X`) and where torch's own helpers do (`distributed_c10d.X`); a collective inside
another is counted once, and DDP's own all-reduce (through the timer's comm hook) not at all.
"""

from __future__ import annotations

import functools
from typing import Any

COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce",
               "reduce_scatter", "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "barrier",
               "monitored_barrier", "gather", "gather_object", "scatter", "all_to_all", "all_to_all_single")
REC: Any = None


def install(rec, timed) -> None:
    global REC
    REC = rec
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d
    for name in COLLECTIVES:
        orig = getattr(c10d, name, None)
        if orig is None or getattr(orig, "_ddp_lessons", False):
            continue
        wrapped = _collective(orig, timed)
        setattr(c10d, name, wrapped)
        if getattr(dist, name, None) is orig:
            setattr(dist, name, wrapped)


def _collective(orig, timed):
    name = orig.__name__
    begin, end = timed(lambda: REC.collective(True)), timed(lambda t: REC.collective(False, t, name))

    @functools.wraps(orig)
    def collective(*args, **kwargs):
        if REC.timer is None:
            return orig(*args, **kwargs)
        token = begin()
        try:
            return orig(*args, **kwargs)
        finally:
            end(token)
    collective._ddp_lessons = True  # type: ignore[attr-defined]
    return collective
