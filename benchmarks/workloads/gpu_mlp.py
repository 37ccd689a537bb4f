"""A plain DDP training script on GPUs, as a practitioner writes one: no import of ddp_lessons. An MLP
(`--width`, `--depth`) on batches of `--batch` from an in-memory DataLoader (pinned, copied to the GPU
without blocking), Adam, under torchrun with NCCL (`--backend gloo` runs several ranks on one GPU:
gloo all-reduces CUDA tensors through the host). Rank `--slow-rank` can be planted `--slow-ms` slower
in every forward: a GPU spin of that length (`torch.cuda._sleep`: the device is slow) or, with `--slow-on
host`, a sleep of the rank's host (its device idles; where ranks share one GPU, its time slices would
also slow the other rank's kernels).

Its own clock: after `--warmup` steps, a CUDA synchronise, then every `--window` steps another; each
window's seconds over its steps is one reading of the step time (the synchronises are the script's own,
the same with or without the doctor). Rank 0 prints one line, ``GPU_MLP {json}``: step_s (median over
windows), windows (each window's step time), steps, loop_s.

    torchrun --standalone --nproc_per_node 1 benchmarks/workloads/gpu_mlp.py --width 256 --depth 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401 - before the group (see knobs.py)
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Slow(nn.Module):
    """A slower rank: in every forward, the GPU kept busy `cycles` clock cycles, or the host `host_s` seconds."""

    def __init__(self, cycles: int = 0, host_s: float = 0.0):
        super().__init__()
        self.cycles, self.host_s = cycles, host_s

    def forward(self, x):
        if self.cycles:
            torch.cuda._sleep(self.cycles)
        if self.host_s:
            time.sleep(self.host_s)
        return x


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--window", type=int, default=50)
    p.add_argument("--backend", default="nccl")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-ms", type=float, default=0.0)
    p.add_argument("--slow-on", choices=["gpu", "host"], default="gpu")
    a = p.parse_args()
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    slow = a.slow_ms * 1e-3 if rank == a.slow_rank else 0.0
    # ~1.7 GHz: the cycles for slow_ms
    layers = [Slow(int(slow * 1.7e9), 0.0) if a.slow_on == "gpu" else Slow(0, slow), nn.Linear(16, a.width), nn.ReLU()]
    for _ in range(a.depth - 1):
        layers += [nn.Linear(a.width, a.width), nn.ReLU()]
    layers.append(nn.Linear(a.width, 1))
    model = DistributedDataParallel(nn.Sequential(*layers).to(device), device_ids=[device.index])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    n = (a.steps + 1) * a.batch * world
    data = TensorDataset(torch.randn(n, 16), torch.randn(n, 1))
    loader = DataLoader(data, batch_size=a.batch, sampler=DistributedSampler(data), pin_memory=True, drop_last=True)
    windows, t0, start = [], None, None
    for i, (x, y) in enumerate(loader):
        if i == a.steps:
            break
        if i == a.warmup:
            torch.cuda.synchronize(device)   # the script's own clock: its synchronises, doctor or not
            t0 = start = time.perf_counter()
        elif i > a.warmup and (i - a.warmup) % a.window == 0:
            torch.cuda.synchronize(device)
            now = time.perf_counter()
            windows.append((now - t0) / a.window)
            t0 = now
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device)
    loop_s = time.perf_counter() - start if start is not None else None
    if rank == 0:
        print("GPU_MLP " + json.dumps({"step_s": statistics.median(windows) if windows else None, "windows": windows,
                                       "steps": a.steps, "loop_s": loop_s, "world": world, "backend": a.backend,
                                       "device": torch.cuda.get_device_name(device)}), flush=True)
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
