"""What a worker asks about its run, the same under `launch` and under `torchrun`.

Workers read the standard variables (RANK, LOCAL_RANK, WORLD_SIZE) the way
nanoGPT does, so one function runs under the helper's launcher, under
`torchrun --standalone --nproc_per_node N`, and under a cluster scheduler.
A leaf of the package: it imports nothing from ddp_lessons.
Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist


def cpu_count() -> int:
    """Cores this process may run on (respects taskset / container limits)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def threads_per_rank(cores: int, ranks: int) -> int:
    """Torch threads for each of `ranks` processes sharing `cores` cores: an equal share, at least 1."""
    return max(1, cores // ranks)


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
    threads = threads_per_rank(cpu_count(), int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
    torch.set_num_threads(threads)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
