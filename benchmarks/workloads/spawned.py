"""A plain DDP script whose ranks mp.spawn starts, as the ImageNet example starts them, with three causes
planted, each removed by a flag. No import of ddp_lessons; the data and model are knobs.py's (images
stored compressed, decoded on every access; a residual MLP).

1. torch's threads: a spawned rank keeps torch's default, every core's threads, so 2 ranks on 2 cores run
   4 (torchrun would set 1). Removed by ``--threads 1``.
2. loader workers over the cores: ``--num-workers 2`` a rank, 4 decoding processes beside 2 ranks on 2
   cores. Removed by ``--num-workers 0`` (the decoding back in the rank: no core is spare for a worker).
3. validation on every rank: each rank evaluates the whole held-out set every epoch, so it is done twice
   over. Removed by ``--eval-sharded`` (a DistributedSampler on it, the count all-reduced).

    python benchmarks/workloads/spawned.py [flags]

Rank 0 prints one line, ``SPAWNED {json}``: loop_s (the training loop and its validations, from a barrier
before them to one after, so the slowest rank's), steps, accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401 - before the process group (see knobs.py)
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from knobs import Net, PayloadSet, make_payloads  # noqa: E402


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads per rank (planted: torch's default)")
    p.add_argument("--num-workers", type=int, default=2, help="loader workers per rank (planted 2)")
    p.add_argument("--eval-sharded", action="store_true", help="each rank validates its shard (planted: the whole set)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--samples", type=int, default=1536, help="training set size (all ranks together)")
    p.add_argument("--eval-samples", type=int, default=3072)
    p.add_argument("--image", type=int, default=48, help="stored image side (decoded to half of it)")
    p.add_argument("--width", type=int, default=192)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--nprocs", type=int, default=2)
    return p.parse_args(argv)


def worker(rank, world, store, a):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    payloads, labels = make_payloads(a.samples + a.eval_samples, a.image, 0)
    train = PayloadSet(payloads[:a.samples], labels[:a.samples], a.image)
    held = PayloadSet(payloads[a.samples:], labels[a.samples:], a.image)
    sampler = DistributedSampler(train, shuffle=True, seed=0, drop_last=True)
    loader = DataLoader(train, batch_size=a.batch_size, sampler=sampler, drop_last=True, num_workers=a.num_workers)
    eval_sampler = DistributedSampler(held, shuffle=False) if a.eval_sharded else None
    held_out = DataLoader(held, batch_size=a.batch_size, sampler=eval_sampler, num_workers=a.num_workers)
    model = DistributedDataParallel(Net(3 * (a.image // 2) ** 2, a.width, a.layers))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    steps, acc = 0, 0.0
    dist.barrier()
    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
        model.eval()
        right = torch.zeros(2)
        with torch.no_grad():
            for x, y in held_out:
                right += torch.tensor([float((model.module(x).argmax(1) == y).sum()), float(len(y))])
        if a.eval_sharded:
            dist.all_reduce(right)
        acc = float(right[0] / right[1])
    dist.barrier()
    loop_s = time.perf_counter() - t0
    if rank == 0:
        print("SPAWNED " + json.dumps({"loop_s": loop_s, "steps": steps, "accuracy": acc}), flush=True)
    del model
    dist.destroy_process_group()


def main():
    a = parse()
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(a.nprocs, os.path.join(tmp, "store"), a), nprocs=a.nprocs)


if __name__ == "__main__":
    main()
