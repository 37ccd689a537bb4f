"""A plain DDP training script, as a practitioner writes one: no import of ddp_lessons. It evaluates on
rank 0 only while the other ranks go on, and accumulates gradients over micro-steps without no_sync.
Runs under torchrun (gloo on CPUs) or as one process. Prints one line per optimizer step on rank 0."""

import argparse
import os
import sys
import weakref

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401 - before the group: imported after it (by DDP), its default arguments hold
from torch import nn         # the group for the rest of the process and destroy_process_group cannot free it
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=12, help="optimizer steps")
p.add_argument("--accum", type=int, default=4, help="micro-steps per optimizer step")
p.add_argument("--no-sync", action="store_true", help="accumulate under no_sync (the fix)")
p.add_argument("--eval-every", type=int, default=4)
p.add_argument("--eval-size", type=int, default=40000)
p.add_argument("--exit-code", type=int, default=0)
p.add_argument("--say-group-freed", action="store_true", help="after destroy_process_group, say on stderr "
               "whether the group was freed (it is, unless something still holds it)")
args = p.parse_args()

ddp = "RANK" in os.environ
if ddp:
    dist.init_process_group("gloo")
rank = dist.get_rank() if ddp else 0
world = dist.get_world_size() if ddp else 1
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
if ddp:
    model = nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
n = args.steps * args.accum * 16 * world
data = TensorDataset(torch.randn(n, 64), torch.randint(0, 10, (n,)))
sampler = DistributedSampler(data, shuffle=False) if ddp else None
loader = DataLoader(data, batch_size=16, sampler=sampler)
test = torch.randn(args.eval_size, 64)

step = 0
for i, (x, y) in enumerate(loader):
    last = i % args.accum == args.accum - 1
    sync = model.no_sync() if ddp and args.no_sync and not last else torch.enable_grad()
    with sync:
        loss = nn.functional.cross_entropy(model(x), y) / args.accum
        loss.backward()
    if last:
        opt.step()
        opt.zero_grad()
        step += 1
        if rank == 0:
            print(f"step {step} loss {loss.item() * args.accum:.4f}")
            if step % args.eval_every == 0:   # rank 0 alone: the others go on and wait for it
                with torch.no_grad():
                    pred = (model.module if ddp else model)(test).argmax(1)
                print(f"eval {int(pred.sum())}")
if ddp:
    # Nothing may hold the group when it is destroyed (the DDP model does, and the no_sync context that
    # names it): then destroy_process_group frees it and joins gloo's threads. Left running into the
    # interpreter's exit, a thread freeing the last all-reduce's work (which holds a Python object from
    # the backward) needs the GIL there, and torch 2.13 aborts the rank now and then: "terminate called
    # without an active exception" (pytorch/pytorch#190489).
    del model, sync
    group = weakref.ref(dist.distributed_c10d._get_default_group())
    dist.destroy_process_group()
    if args.say_group_freed:
        print(f"rank {rank}: group freed by destroy_process_group: {group() is None}", file=sys.stderr)
raise SystemExit(args.exit_code)
