"""The small workers of notebook 00: a first all-reduce and a small DDP model.

Workers live in a module, not in notebook cells: spawned processes import
them by name (see `launch`). Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.nn as nn

from ...tool import hooks, runtime
from ...tool.ddp import gradient_bytes, wrap_ddp
from ...course.toy import mlp
from ...tool.launcher import report_progress
from ...tool.timing import StepTimer, ddp_logging_times


def hello() -> dict:
    """Each rank all-reduces its rank + 1 and says what it sees. Defined in notebook 00_first_launch."""
    t = torch.tensor([float(dist.get_rank() + 1)], device=runtime.device())  # NCCL needs GPU tensors
    dist.all_reduce(t)  # sum over ranks: 1 + 2 + ... + world_size
    return {"rank": dist.get_rank(), "world_size": dist.get_world_size(),
            "backend": dist.get_backend(), "sum": t.item(),
            "env": {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR")},
            "threads": torch.get_num_threads(), "pid": os.getpid()}


def fail_on(rank: int, how: str = "raise") -> None:
    """Make rank `rank` fail (`raise`, `exit`, `kill`, or `skip` an all-reduce);
    the other ranks go on to an all-reduce that then loses its partner. Defined in notebook 00_first_launch."""
    if dist.get_rank() == rank:
        if how == "raise":
            raise ValueError(f"rank {rank} cannot read its shard")
        if how == "exit":
            os._exit(3)
        if how == "kill":
            os.kill(os.getpid(), 9)
        if how == "skip":
            return None  # never joins the all-reduce below
    t = torch.ones(1, device=runtime.device())
    dist.all_reduce(t)
    return t.item()


def train_mlp(steps: int = 20, width: int = 256, depth: int = 4, batch: int = 64,
              bucket_cap_mb: float = 25.0, timed: bool = True, comm_delay_s: float = 0.0,
              comm_dtype=None, ddp_logging: bool = False, seed: int = 0) -> dict:
    """Train a small MLP with DDP on random data; return per-step timings.

    `timed=False` runs the same loop with the timer disabled (overhead benchmark).
    `comm_delay_s`: a known delay per bucket after its all-reduce (`hooks.delayed`);
    `comm_dtype`: all-reduce in torch.float16 / torch.bfloat16 (`hooks.compression_hook`).
    Both are sent whether timed or not.
    `ddp_logging=True` also returns DDP's own timings of every step, to cross-check.
    Defined in notebook 00_first_launch."""
    torch.manual_seed(seed)  # same initial weights on every rank (DDP also broadcasts)
    dev = runtime.device()
    model = wrap_ddp(mlp(width, depth).to(dev), dev, bucket_cap_mb=bucket_cap_mb)
    if ddp_logging:
        model._set_ddp_runtime_logging_sample_rate(1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed + dist.get_rank())
    data = [(torch.randn(batch, 32, generator=g), torch.randn(batch, 1, generator=g)) for _ in range(steps)]
    # What is sent is the hook's business; the timer only wraps it (timed=False: registered alone).
    hook = hooks.delayed(hooks.compression_hook(comm_dtype), comm_delay_s)
    timer = StepTimer(model, enabled=timed, hook=hook)
    logged = []
    for i, (x, y) in enumerate(timer.data(data)):
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        with timer.phase("forward"):
            loss = nn.functional.mse_loss(model(x), y)
        if ddp_logging and i > 0:
            # DDP updates its logging data in the forward pass: it now holds step i-1.
            logged.append(ddp_logging_times(model))
        timer.finish_step(loss, opt)
        report_progress(i + 1, steps)
    out = timer.result() if timed else {"rank": dist.get_rank(), "steps": []}
    out["ddp_logging"] = logged
    out["grad_bytes"] = gradient_bytes(model)
    out["comm_hook"] = model._get_ddp_logging_data().get("comm_hook", "")  # the hook DDP runs, by name
    return out
