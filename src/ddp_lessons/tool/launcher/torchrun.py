"""`run(fn, ...)`: one call that works started plainly and under torchrun.

Started plainly, it is `launch`; started by torchrun, this process is one
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
        result = fn(*args, **(kwargs or {}))
        gathered = [None] * dist.get_world_size() if runtime.is_main() else None
        dist.gather_object(result, gathered, dst=0)
        return Results(gathered) if gathered is not None else None
    finally:
        dist.destroy_process_group()
