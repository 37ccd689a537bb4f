"""What a worker asks about its run, the same under `launch` and under `torchrun`.

Workers read the standard variables (RANK, LOCAL_RANK, WORLD_SIZE) the way
nanoGPT does, so one function runs under the helper's launcher, under
`torchrun --standalone --nproc_per_node N`, and under a cluster scheduler.
Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist

if dist.is_available():
    # Imported before any process group exists, on purpose: the collectives of
    # torch.distributed.nn.functional take `group=group.WORLD` as a default
    # argument, evaluated at import. Imported after init_process_group (DDP's
    # constructor imports torch._dynamo, which imports it), ten defaults hold the
    # default group for the rest of the process, so destroy_process_group cannot
    # free it: gloo's threads run on into interpreter exit, where one still
    # finishing gather_object's work needs the GIL and aborts the rank
    # ("terminate called without an active exception").
    import torch.distributed.nn


def cpu_count() -> int:
    """Cores this process may run on (respects taskset / container limits)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def under_torchrun() -> bool:
    """True when torchrun (or another launcher) started this process as one rank."""
    return "TORCHELASTIC_RUN_ID" in os.environ or (
        "RANK" in os.environ and "WORLD_SIZE" in os.environ and not dist.is_initialized())


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", 0))


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", 0))


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else int(os.environ.get("WORLD_SIZE", 1))


def is_main() -> bool:
    """Rank 0: the one rank that prints, logs and saves."""
    return rank() == 0


def device() -> torch.device:
    """This rank's device: its own GPU under NCCL, else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", local_rank())
    return torch.device("cpu")


def init_from_env(backend: str | None = None, timeout_s: float = 600.0) -> None:
    """Join the process group that torchrun describes in the environment."""
    if dist.is_initialized():
        return
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    kwargs = {}
    if backend == "nccl":
        torch.cuda.set_device(local_rank())
        kwargs["device_id"] = torch.device("cuda", local_rank())
    # As under launch: the cores divided among the ranks of this node.
    threads = max(1, cpu_count() // int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
    torch.set_num_threads(threads)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)


def run(fn, args=(), world_size: int = 2, backend: str | None = None, **launch_kwargs):
    """Run a worker on every rank, wherever this process was started.

    Under torchrun: this process is one rank; it joins the group, runs
    `fn(*args)`, and rank 0 gets every rank's result (others get None).
    Otherwise: `launch` starts `world_size` workers and returns their results.
    """
    if not under_torchrun():
        from .launch import launch
        return launch(fn, args, world_size=world_size, backend=backend, **launch_kwargs)
    init_from_env(backend)
    try:
        result = fn(*args)
        gathered = [None] * dist.get_world_size() if is_main() else None
        dist.gather_object(result, gathered, dst=0)
        return gathered
    finally:
        dist.destroy_process_group()
