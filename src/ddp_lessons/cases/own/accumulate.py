"""Gradient accumulation in plain PyTorch DDP with `no_sync`: k micro-batches,
one all-reduce. Inside `with ddp.no_sync():` backward keeps the gradients
local; the k-th micro-batch runs outside it and DDP all-reduces the sum.
Each micro-batch's loss is divided by k, so the result is the gradient of the
mean loss over the whole global batch: the large-batch gradient, exactly up
to float rounding. Not with BatchNorm: its statistics are per micro-batch, so
a BatchNorm model's accumulated gradient is not the large batch's (an MLP
here). Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ...tool import runtime
from ...course.toy import mlp
from ...tool.ddp import wrap_ddp
from ...tool.hooks import allreduce_hook


def _count_allreduces(ddp):
    calls = []

    def counting_hook(state, bucket):   # DDP needs a plain function and the name `bucket`
        calls.append(bucket.index())
        return allreduce_hook(state, bucket)
    ddp.register_comm_hook(None, counting_hook)
    return calls


def _global_batch(micro: int, k: int, world: int, d_in: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(world * k * micro, d_in, generator=g)
    return x, torch.randn(world * k * micro, 1, generator=g)


def accumulate(micro: int = 8, k: int = 4, d_in: int = 32, use_no_sync: bool = True, seed: int = 0) -> dict:
    """One optimizer step's gradients from `k` micro-batches of `micro` samples
    per rank, with or without `no_sync`; the all-reduces it took; and (rank 0)
    the largest difference from the gradient of one process on the whole
    global batch (world x k x micro samples). Defined in notebook 07_diagnose_your_own_run."""
    rank, world = runtime.rank(), runtime.world_size()
    torch.manual_seed(seed)
    model = mlp(64, 2, d_in)
    ddp = wrap_ddp(model, torch.device("cpu"))
    calls = _count_allreduces(ddp)
    x, y = _global_batch(micro, k, world, d_in, seed)
    mine = slice(rank * k * micro, (rank + 1) * k * micro)   # this rank's share of the global batch
    xs, ys = x[mine].split(micro), y[mine].split(micro)
    for i, (xb, yb) in enumerate(zip(xs, ys, strict=True)):
        last = i == k - 1
        ctx = ddp.no_sync() if use_no_sync and not last else contextlib.nullcontext()
        with ctx:
            (F.mse_loss(ddp(xb), yb) / k).backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    out = {"rank": rank, "world_size": world, "micro": micro, "k": k, "no_sync": use_no_sync,
           "allreduce_calls": len(calls), "samples": world * k * micro}
    if rank == 0:
        out["max_abs_diff"], out["max_abs_grad"] = _against_large_batch(grads, x, y, d_in, seed)
    dist.barrier()
    return out


def _against_large_batch(grads, x, y, d_in, seed):
    torch.manual_seed(seed)
    ref = mlp(64, 2, d_in)   # the same initial weights
    F.mse_loss(ref(x), y).backward()
    diff = max(float((g - p.grad).abs().max()) for g, p in zip(grads, ref.parameters(), strict=True))
    return diff, max(float(p.grad.abs().max()) for p in ref.parameters())
