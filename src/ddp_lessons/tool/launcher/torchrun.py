"""`run(fn, ...)`: one call that works started plainly and under torchrun; `gather(value)`: every
rank's value on rank 0, for a script that owns its process group (torchrun, nanoGPT's style).

Started plainly, `run` is `launch`; started by torchrun, this process is one
rank: it joins torchrun's group, runs the worker and gathers every rank's
result on rank 0. Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import warnings

import torch.distributed as dist

from .. import runtime
from .parent import launch
from .results import Results


def run(fn, args=(), kwargs=None, world_size: int = 2, backend: str | None = None, **launch_kwargs):
    """Run a worker on every rank, wherever this process was started.

    Under torchrun: this process is one rank; it joins the group, runs
    `fn(*args)`, and rank 0 gets every rank's result (others get None).
    Otherwise: `launch` starts `world_size` workers and returns their results.
    Under torchrun, torchrun's WORLD_SIZE wins over `world_size`, and
    `launch`'s own options (timeout, threads, ...) cannot apply: rank 0 warns.
    """
    if not runtime.under_torchrun():
        return launch(fn, args, kwargs, world_size=world_size, backend=backend, **launch_kwargs)
    if launch_kwargs and runtime.is_main():
        warnings.warn(f"under torchrun, launch options {', '.join(sorted(launch_kwargs))} are ignored: torchrun "
                      "started these processes (give such settings on its command line, or run plainly)",
                      stacklevel=2)
    runtime.init_from_env(backend)
    try:
        return gather(fn(*args, **(kwargs or {})))
    finally:
        dist.destroy_process_group()


def gather(value, group=None):
    """Every rank's `value` (e.g. `timer.result()`) on rank 0 of `group`, in rank order, as `Results`;
    None on the other ranks. A collective: every rank calls it, before the script destroys its
    process group. Without a process group (one process): `Results([value])`.

        result = timer.result()
        ranks = ddp_lessons.gather(result)
        if ranks is not None:
            print(ddp_lessons.diagnose(ranks))"""
    if not (dist.is_available() and dist.is_initialized()):
        return Results([value])
    main = dist.get_rank(group) == 0
    out = [None] * dist.get_world_size(group) if main else None
    dist.gather_object(value, out, dst=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
    return Results(out) if main else None
