"""A plain DDP script whose ranks torch.multiprocessing starts (no torchrun), as the ImageNet example
does with mp.spawn: no import of ddp_lessons. `--start spawn|fork|mp.spawn`; rank 1 can be planted
slower (`--slow-ms`); a metric all-reduced by the script itself every step (`--sync-metric`, as
Lightning's self.log(sync_dist=True) does); loader workers (`--workers`) that report their torch
threads (`--say-threads`)."""

import argparse
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401 - before the group (see plain_ddp.py)
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Slow(nn.Module):
    """Sleeps `ms` in every forward: this rank computes more per step."""
    def __init__(self, ms):
        super().__init__()
        self.ms = ms

    def forward(self, x):
        time.sleep(self.ms / 1e3)
        return x


class Items(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), torch.get_num_threads()


def worker(rank, world, store_path, args):
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    slow = Slow(args.slow_ms if rank == 1 else 0.0)   # rank 1 computes more per step
    model = nn.parallel.DistributedDataParallel(nn.Sequential(slow, nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = Items(args.steps * 16 * world)
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, shuffle=False),
                        num_workers=args.workers)
    threads = set()
    n = 0
    for x, t in loader:
        n += 1
        threads.update(int(v) for v in t)
        loss = model(x).square().mean()
        if args.sync_metric:
            metric = loss.detach().clone()
            dist.all_reduce(metric)               # the script's own all-reduce, every step
        loss.backward()
        opt.step()
        opt.zero_grad()
    if rank == 0:
        print(f"done {n} steps", flush=True)
    if args.say_threads:
        print(f"rank {rank}: loader worker threads {sorted(threads)}", flush=True)
    del model
    dist.destroy_process_group() if args.destroy else None


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--start", default="spawn", choices=["spawn", "fork", "mp.spawn"])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--slow-ms", type=float, default=0.0)
    p.add_argument("--sync-metric", action="store_true")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads per rank (0: torch's default, every core)")
    p.add_argument("--say-threads", action="store_true")
    p.add_argument("--destroy", action="store_true", help="destroy the process group at the end")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        if args.start == "mp.spawn":
            mp.spawn(worker, args=(2, store, args), nprocs=2)
        else:
            mp.start_processes(worker, args=(2, store, args), nprocs=2, start_method=args.start)
    sys.exit(0)
