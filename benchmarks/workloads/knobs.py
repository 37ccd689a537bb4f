"""A plain DDP training script with causes of slowness planted in it, each switchable by a flag.

A residual MLP classifies small synthetic images stored the way a practitioner might keep them on
disk: each sample is a PNG-like payload (rows Sub-filtered, then zlib-compressed), decoded on every
access by the Dataset. By default ("all") three causes are planted:

1. many small gradient buckets: ``bucket_cap_mb=0.05`` makes one bucket (one allreduce) per weight
   tensor. Removed by ``--bucket-cap-mb 25`` (torch's default size).
2. per-sample decoding in the loader with no spare core: ``__getitem__`` decompresses and unfilters
   every sample on every access, in the training process (``--num-workers 0``). Removed by
   ``--predecode`` (decode the whole set once, before the loop). ``--num-workers N`` and
   ``--persistent-workers`` move the decoding to worker processes instead.
3. ``find_unused_parameters=True`` although every parameter is used. Removed by ``--find-unused 0``.

Run on 2 ranks, or as one process without a process group (a plain model, not DDP):

    torchrun --standalone --nproc_per_node 2 benchmarks/workloads/knobs.py [flags]
    python benchmarks/workloads/knobs.py [flags]

Rank 0 prints one line, ``KNOBS {json}``: loop_s (wall time of the training loop, from a barrier
before it to a barrier after it, so the slowest rank's), steps (optimizer steps), data_s (time rank 0
waited for batches), per_step_s (rank 0's time per optimizer step, waiting for batches included).
Nothing is written to disk.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
import zlib

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401 - before the process group: imported later (by DDP's constructor), its
import torch.nn as nn        # default arguments hold the group past destroy_process_group and a rank can abort at exit
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler

CLASSES = 10


def encode(img: np.ndarray, level: int = 6) -> bytes:
    """PNG-like: each row Sub-filtered (difference to the pixel on its left), then zlib."""
    filt = img.copy()
    filt[:, 1:] -= img[:, :-1]  # uint8 arithmetic wraps, as PNG's does
    return zlib.compress(filt.tobytes(), level)


def decode(payload: bytes, size: int) -> torch.Tensor:
    """Undo encode(), then 2x2-average-pool and normalise to a flat float vector."""
    filt = np.frombuffer(zlib.decompress(payload), dtype=np.uint8).reshape(size, size, 3)
    img = np.cumsum(filt, axis=1, dtype=np.uint8)  # undo the Sub filter (wrapping sum)
    x = img.astype(np.float32).reshape(size // 2, 2, size // 2, 2, 3).mean(axis=(1, 3))
    x = (x - 127.5) / 64.0
    return torch.from_numpy(x.reshape(-1))


def make_payloads(n: int, size: int, seed: int) -> tuple[list[bytes], list[int]]:
    """n synthetic images: a class-dependent smooth wave plus noise, encoded (built in chunks, vectorised)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    labels = rng.integers(0, CLASSES, n)
    tint = np.array([0, 20, -20], np.float32)
    payloads = []
    for s in range(0, n, 256):
        c = labels[s:s + 256, None, None].astype(np.float32)
        phase = rng.uniform(0, 0.5, (len(c), 1, 1)).astype(np.float32)
        base = 127 + 80 * np.sin(2 * np.pi * ((c % 5 + 1) * xx + (c // 5 + 1) * yy + phase)).astype(np.float32)
        noise = rng.integers(-12, 13, (len(c), size, size, 3), dtype=np.int16)
        imgs = np.clip(base[..., None] + tint + noise, 0, 255).astype(np.uint8)
        payloads += [encode(img) for img in imgs]
    return payloads, [int(y) for y in labels]


class PayloadSet(Dataset):
    """Decodes its sample on every __getitem__, unless predecoded once up front."""

    def __init__(self, payloads, labels, size, predecode=False):
        self.payloads, self.labels, self.size = payloads, torch.tensor(labels), size
        self.cache = torch.stack([decode(p, size) for p in payloads]) if predecode else None

    def __len__(self):
        return len(self.payloads)

    def __getitem__(self, i):
        x = self.cache[i] if self.cache is not None else decode(self.payloads[i], self.size)
        return x, self.labels[i]


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return x + F.gelu(self.fc(self.norm(x)))


class Net(nn.Module):
    def __init__(self, d_in, d, layers):
        super().__init__()
        self.stem = nn.Linear(d_in, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(layers)])
        self.head = nn.Linear(d, CLASSES)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bucket-cap-mb", type=float, default=0.05, help="DDP bucket size (planted 0.05; torch's 25)")
    p.add_argument("--find-unused", type=int, choices=(0, 1), default=1, help="find_unused_parameters (planted 1)")
    p.add_argument("--predecode", action="store_true", help="decode every sample once, before the loop")
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--persistent-workers", action="store_true")
    p.add_argument("--accum", type=int, default=1, help="micro-steps per optimizer step")
    p.add_argument("--no-sync", action="store_true", help="ddp.no_sync() on all but the last micro-step")
    p.add_argument("--eval-rank0", action="store_true", help="rank 0 evaluates every --eval-every steps")
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=48, help="per rank")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: leave it)")
    p.add_argument("--samples", type=int, default=4096, help="training set size (all ranks together)")
    p.add_argument("--eval-samples", type=int, default=512)
    p.add_argument("--image", type=int, default=56, help="stored image side (decoded to half of it)")
    p.add_argument("--width", type=int, default=384)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def main():
    a = parse()
    distributed = "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    # every rank builds the same data (same seed); the sampler gives each rank its share
    payloads, labels = make_payloads(a.samples + a.eval_samples, a.image, a.seed)
    train = PayloadSet(payloads[:a.samples], labels[:a.samples], a.image, a.predecode)
    if distributed:
        sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=a.seed, drop_last=True)
    else:
        sampler = torch.utils.data.RandomSampler(train, generator=torch.Generator().manual_seed(a.seed))
    loader = DataLoader(train, batch_size=a.batch_size, sampler=sampler, drop_last=True, num_workers=a.num_workers,
                        persistent_workers=a.persistent_workers and a.num_workers > 0)
    held_out = None
    if a.eval_rank0 and rank == 0:
        held_out = DataLoader(PayloadSet(payloads[a.samples:], labels[a.samples:], a.image, a.predecode),
                              batch_size=a.batch_size)

    model = Net(3 * (a.image // 2) ** 2, a.width, a.layers)
    if distributed:
        model = DistributedDataParallel(model, bucket_cap_mb=a.bucket_cap_mb,
                                        find_unused_parameters=bool(a.find_unused))
    net = model.module if distributed else model
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)

    def evaluate():
        net.eval()
        right = 0
        with torch.no_grad():
            for x, y in held_out:
                right += int((net(x).argmax(1) == y).sum())
        net.train()
        return right / len(held_out.dataset)

    steps, data_s, per_step = 0, 0.0, []
    if distributed:
        dist.barrier()
    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        if distributed:
            sampler.set_epoch(epoch)
        batches = iter(loader)
        for _ in range(len(loader) // a.accum):
            ts = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            for micro in range(a.accum):
                tw = time.perf_counter()
                x, y = next(batches)
                data_s += time.perf_counter() - tw
                skip = distributed and a.no_sync and micro < a.accum - 1
                with model.no_sync() if skip else contextlib.nullcontext():
                    loss = F.cross_entropy(model(x), y) / a.accum
                    loss.backward()
            opt.step()
            steps += 1
            if held_out is not None and steps % a.eval_every == 0:
                evaluate()
            per_step.append(time.perf_counter() - ts)
        del batches
    end = None
    if distributed:
        end = dist.barrier(async_op=True)
        end.wait()
    loop_s = time.perf_counter() - t0

    if rank == 0:
        print("KNOBS " + json.dumps({"loop_s": loop_s, "steps": steps, "world_size": world, "data_s": data_s,
                                     "per_step_s": per_step, "config": vars(a)}), flush=True)
    if distributed:
        # Hold the last barrier's work (it holds the collectives before it) until the group is gone: freed last
        # on gloo's worker thread, a work can need the GIL while this thread, holding it, joins that worker in
        # the group's destructor, and the rank hangs at exit.
        del model, opt
        dist.destroy_process_group()
        del end


if __name__ == "__main__":
    main()
