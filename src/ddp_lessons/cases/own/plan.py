"""From options to the objects of one rank's run, once: model, DDP wrap,
optimizer, sampler, loader, test set, evaluator. The loops in `train` and
`trace` then read no option. Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from ...tool import runtime
from ...tool.ddp import wrap_ddp
from . import cores
from .data import SyntheticCIFAR
from .model import SmallResNet
from .options import Options


@dataclasses.dataclass
class Rank:
    o: Options
    device: torch.device
    ddp: torch.nn.Module
    opt: torch.optim.Optimizer
    sampler: DistributedSampler
    loader: DataLoader
    evaluate: Callable[[], dict]
    log: Callable[[int, int, torch.Tensor], None]
    workers: int
    threads: int


@functools.cache
def launch_threads() -> int:
    """This rank's intra-op threads as the launcher set them (its share of the cores), read once per
    process: a run that lowered them (the fixed setup) must not lower the next one (07's rounds
    alternate setups in one process)."""
    return torch.get_num_threads()


def workers_and_threads(o: Options, device_type: str, ranks: int) -> tuple[int, int]:
    """Loader workers and torch threads of this rank: as set, or the core budget
    of `ranks` ranks sharing this machine's cores."""
    threads = launch_threads()
    if o.num_workers != "budget":
        return o.num_workers, threads
    b = cores.budget(runtime.cpu_count(), ranks, device_type)
    return b["workers"], min(threads, b["threads"])


def loader(ds, batch_size, sampler, workers, seed, persistent=False):
    return DataLoader(ds, batch_size=batch_size, sampler=sampler, num_workers=workers,
                      generator=torch.Generator().manual_seed(seed), persistent_workers=bool(persistent and workers),
                      # fork: a spawned rank would spawn its workers too, each importing torch
                      multiprocessing_context="fork" if workers and sys.platform == "linux" else None)


def build(o: Options, group=None) -> Rank:
    """This rank's objects; `group`: the process group of the ranks that train
    (None: all of them)."""
    dev = runtime.device()
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    workers, threads = workers_and_threads(o, dev.type, world)
    torch.set_num_threads(threads)
    torch.manual_seed(o.seed)   # the same weights on every rank
    model = SmallResNet(width=o.width, with_unused_branch=o.unused_branch).to(dev)
    ddp = wrap_ddp(model, dev, find_unused_parameters=o.find_unused_parameters, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=o.lr, momentum=0.9)
    trainset = SyntheticCIFAR(o.train_size, o.seed, augment=True)
    # Shuffles; the order changes only with set_epoch.
    sampler = DistributedSampler(trainset, num_replicas=world, rank=rank, seed=o.seed)
    testset = SyntheticCIFAR(o.test_size, o.seed + 1, augment=False)
    train = loader(trainset, o.batch_size, sampler, workers, o.seed, o.persistent_workers)
    return Rank(o, dev, ddp, opt, sampler, train,
                make_evaluator(o, ddp, testset, dev, group), make_log(o), workers, threads)


def make_evaluator(o: Options, ddp, testset, dev, group=None) -> Callable[[], dict]:
    """Accuracy on the test set: the whole set on every rank (the habit), or each
    rank's shard with the counts summed across ranks (distributed)."""
    if o.evaluation == "none":
        return lambda: {"samples": 0, "accuracy": None}
    sharded = o.evaluation == "distributed"
    sampler = (DistributedSampler(testset, dist.get_world_size(group), dist.get_rank(group), shuffle=False)
               if sharded else None)
    test_loader = loader(testset, 4 * o.batch_size, sampler, 0, o.seed)

    def evaluate():
        ddp.eval()
        counts = torch.zeros(2, device=dev)
        with torch.no_grad():
            for x, y in test_loader:
                x, y = x.to(dev), y.to(dev)
                counts += torch.stack([(ddp.module(x).argmax(1) == y).sum(), torch.tensor(len(y), device=dev)])
        if sharded:
            dist.all_reduce(counts, group=group)
        ddp.train()
        seen = int(counts[1])  # note: a CPU-GPU sync point, once per evaluation
        return {"samples": len(test_loader.dataset) if not sharded else len(sampler),
                "accuracy": float(counts[0]) / seen}
    return evaluate


def make_log(o: Options) -> Callable:
    if o.step_log == "none":
        return lambda epoch, step, loss: None

    def log(epoch, step, loss):
        # loss.item() waits for the step's work on a GPU: a CPU-GPU sync point every step.
        print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
    return log
