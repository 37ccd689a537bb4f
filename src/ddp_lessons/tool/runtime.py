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

if dist.is_available():
    # Imported before any process group exists, on purpose: the collectives of
    # torch.distributed.nn.functional take `group=group.WORLD` as a default
    # argument, evaluated at import. Imported after init_process_group (DDP's
    # constructor imports torch._dynamo, which imports it), ten defaults hold the
    # default group for the rest of the process, so destroy_process_group cannot
    # free it: gloo's threads run on into interpreter exit, where one still
    # finishing gather_object's work needs the GIL and aborts the rank
    # ("terminate called without an active exception").
    import torch.distributed.nn  # noqa: F401 - imported for the side effect above


def cpu_count() -> int:
    """Cores this process may run on (respects taskset / container limits). Defined in notebook 02_case1_answer."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def threads_per_rank(cores: int, ranks: int) -> int:
    """Torch threads for each of `ranks` processes sharing `cores` cores: an equal share, at least 1.
    Defined in notebook 06_case2_breakeven."""
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


def choose_backend(local_world_size: int, gpus: int) -> str:
    """NCCL when each of this node's ranks can have a GPU of its own, else gloo.

    The rule of `ddp_lessons.place` (kept here too: this module imports
    nothing from the package), for ranks that torchrun started.
    """
    return "nccl" if 0 < local_world_size <= gpus else "gloo"


def accelerator_for(backend: str | None, asked: str | None = None) -> str:
    """Lightning's word ("gpu" | "cpu") for the device a rank of `backend` uses.

    `backend` None (no process group): `asked`, default "cpu". `asked` that
    contradicts the group (cpu under NCCL, gpu under gloo) is refused with a
    one-line ValueError: a worker must run where its process group is.
    """
    if asked not in (None, "cpu", "gpu"):
        raise ValueError(f"accelerator={asked!r}: use 'cpu', 'gpu', or None to follow the process group")
    if backend is None:
        return asked or "cpu"
    have = "gpu" if backend == "nccl" else "cpu"
    if asked not in (None, have):
        raise ValueError(f"accelerator={asked!r} contradicts the process group's backend {backend!r} "
                         f"(its ranks run on {'one GPU each' if have == 'gpu' else 'the CPU'}): pass "
                         f"accelerator={have!r}, or None to follow the group (a Placement's .accelerator)")
    return have


def accelerator(asked: str | None = None) -> str:
    """This rank's device in Lightning's word: "gpu" under NCCL, else "cpu" (see `accelerator_for`)."""
    return accelerator_for(dist.get_backend() if dist.is_initialized() else None, asked)


def init_from_env(backend: str | None = None, timeout_s: float = 600.0) -> None:
    """Join the process group that torchrun describes in the environment.

    `backend=None`: NCCL with GPU LOCAL_RANK when LOCAL_WORLD_SIZE GPUs are
    visible, else gloo on the CPU (as `launch` chooses).
    """
    if dist.is_initialized():
        return
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    if backend is None:
        backend = choose_backend(local_world, torch.cuda.device_count())
    kwargs: dict = {}
    if backend == "nccl":
        torch.cuda.set_device(local_rank())
        kwargs["device_id"] = torch.device("cuda", local_rank())
    # As under launch: the cores divided among the ranks of this node.
    torch.set_num_threads(threads_per_rank(cpu_count(), local_world))
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
