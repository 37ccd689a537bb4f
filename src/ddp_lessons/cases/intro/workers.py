"""The small workers of notebook 00: a first all-reduce, a failing rank, all-reduces of a few sizes
interleaved round by round (`interleaved`), and `train_mlp` (`train.train` with its options as
arguments, as the tool's tests and benchmarks call it).

Workers live in a module, not in notebook cells: spawned processes import
them by name (see `launch`). Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

from ...tool import runtime
from ...tool.launcher import report_progress
from . import train
from .options import Options

_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16"}


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


def interleaved(sizes, rounds: int = 150, warmup: int = 10) -> dict:
    """Worker: one all-reduce of each of `sizes` (bytes, float32) per round, in an order rotated and
    reversed from round to round, so a busy moment of the machine hits every size alike (the sweep times
    each size in a block of its own). Returns this rank's seconds per call: `times[i][k]`, size i, round k.
    On GPUs each call is timed by CUDA events, read after the last round. Defined in notebook 00_first_launch."""
    dev = runtime.device()
    bufs = [torch.ones(max(1, s // 4), device=dev) for s in sizes]
    for b in bufs:
        for _ in range(warmup):
            dist.all_reduce(b)
    dist.barrier()  # every rank starts the rounds together
    marks = [[] for _ in sizes]
    for k in range(rounds):
        order = list(range(len(sizes)))[k % len(sizes):] + list(range(len(sizes)))[:k % len(sizes)]
        for i in reversed(order) if k % 2 else order:
            marks[i].append(_timed(bufs[i], dev))
        report_progress(k + 1, rounds)  # between rounds, outside every timed call
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)  # note: the one CPU-GPU sync, after every round
        marks = [[a.elapsed_time(b) / 1e3 for a, b in m] for m in marks]
    return {"rank": dist.get_rank(), "sizes": [b.numel() * 4 for b in bufs], "times": marks}


def _timed(buf, dev):
    if dev.type == "cuda":
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dist.all_reduce(buf)
        b.record()
        return a, b
    t0 = time.perf_counter()
    dist.all_reduce(buf)  # gloo: returns when the all-reduce has completed
    return time.perf_counter() - t0


def train_mlp(steps: int = 20, width: int = 256, depth: int = 4, batch: int = 64,
              bucket_cap_mb: float = 25.0, timed: bool = True, comm_delay_s: float = 0.0,
              comm_dtype=None, ddp_logging: bool = False, seed: int = 0) -> dict:
    """`train.train` with `Options(steps=..., ...)` given as arguments (`comm_dtype` may be a torch dtype)."""
    return train.train(Options(steps=steps, width=width, depth=depth, batch=batch, bucket_cap_mb=bucket_cap_mb,
                               timed=timed, comm_delay_s=comm_delay_s, comm_dtype=_DTYPES.get(comm_dtype, comm_dtype),
                               ddp_logging=ddp_logging, seed=seed))
