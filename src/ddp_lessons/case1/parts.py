"""The pieces case 1's loop is built from, each switched by one option: the
model (heads or not), the sampler (as posted or as the answer has it), the
loader, the LR schedule, the loss accumulator, the log, what happens at an
epoch's edges. `setup.build` picks them from the options once; the loop then
only calls them. Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Callable

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from .. import runtime
from ..common import sync
from .model import M3AEConfig, M3AETransformerSS, drop_unused_heads
from .options import Options


def build_model(o: Options, num_answers: int, image_size: int, dev) -> torch.nn.Module:
    base = M3AEConfig.m3ae if o.model == "m3ae" else M3AEConfig.tiny
    torch.manual_seed(o.seed)  # same weights on every rank (DDP broadcasts rank 0's anyway)
    model = M3AETransformerSS(base(num_answers=num_answers, image_size=image_size))
    if o.drop_heads:
        drop_unused_heads(model)
    return model.to(dev)


def train_sampler(o: Options, trainset):
    if o.setup == "posted":
        # As posted: LOCAL_RANK decides whether init_process_group ran (under
        # a launcher it did, before this line), the rank given is LOCAL_RANK.
        local_rank = int(os.environ.get("LOCAL_RANK", -1))
        word_size = dist.get_world_size()  # raises when the group was never initialised
        return DistributedSampler(trainset, num_replicas=word_size, rank=local_rank, seed=o.seed)
    if dist.is_initialized():
        return DistributedSampler(trainset, seed=o.seed)  # rank and size from the group
    return None


def core_budget(cores: int, ranks: int, device_type: str, num_workers="cores",
                thread_cap: int | None = None) -> tuple[int, int]:
    """(loader workers, intra-op threads) of one rank: the core budget.

    A rank's share is `cores // ranks` (at least 1), the division `launch`
    and torchrun's path use. Workers plus threads stay within the share, so
    no core is double-booked (an H200 run had 16 workers beside 16 threads
    on 16 cores; its bf16 steps jitter with 2 to 15 workers alike, so that
    jitter has another cause: data/runs/case1-h200-bf16-jitter.json):
    - CUDA: the math runs on the GPU; the rank's process only queues kernels
      and copies batches, one thread's work. Extra intra-op threads would
      spin after each CPU op, on cores the workers need, so threads = 1 and
      workers = share - 1 (decoding JPEGs is what the loader spends CPU on);
    - CPU: the math is the step, so threads get most of the share and the
      workers a quarter of it, rounded up; a share of 1 core gets no worker
      (a worker would only take turns with the math on that core, so the
      batch is loaded in the rank's own process: 2 ranks on 2 cores).
    An explicit `num_workers` (the post's 4, the answer's 8) is kept as
    given: the threads then yield to it, down to 1. `thread_cap` (the
    OMP_NUM_THREADS the launcher set) lowers the threads further.
    """
    share = max(1, cores // max(1, ranks))
    if num_workers == "cores":
        if device_type == "cuda":
            workers = share - 1
        else:
            workers = 0 if share == 1 else -(-share // 4)
    else:
        workers = int(num_workers)
    threads = 1 if device_type == "cuda" else max(1, share - workers)
    if thread_cap:
        threads = max(1, min(threads, thread_cap))
    return workers, threads


def rank_budget(o: Options, device_type: str) -> tuple[int, int]:
    """`core_budget` for this process: its cores, the ranks on this node
    (LOCAL_WORLD_SIZE) and the launcher's OMP_NUM_THREADS as the thread cap."""
    cap = os.environ.get("OMP_NUM_THREADS", "")
    return core_budget(runtime.cpu_count(), int(os.environ.get("LOCAL_WORLD_SIZE", 1)), device_type,
                       o.num_workers, int(cap) if cap.isdigit() else None)


def make_loader(o, ds, bs, sampler, nw, cuda, shuffle=False):
    return DataLoader(ds, batch_size=bs, sampler=sampler, shuffle=shuffle and sampler is None,
                      num_workers=nw, collate_fn=ds.collote, pin_memory=o.pin_memory and cuda,
                      persistent_workers=o.persistent_workers and nw > 0,
                      generator=torch.Generator().manual_seed(o.seed),
                      # fork, as under torchrun: a spawned rank would otherwise spawn its
                      # loader workers too, each importing torch (seconds per epoch)
                      multiprocessing_context="fork" if nw and sys.platform == "linux" else None)


def to_device(batch: dict, dev) -> torch.Tensor:
    # The post's copies, made non-blocking (asynchronous only from pinned memory).
    batch["image"][0] = batch["image"][0].to(dev, non_blocking=True)
    for k in ("text_ids", "text_labels", "text_ids_mlm", "text_labels_mlm", "text_masks"):
        batch[k] = batch[k].to(dev, non_blocking=True)
    targets = torch.cat([t.unsqueeze(0) for t in batch["vqa_labels"]], dim=0)
    return targets.to(dev, non_blocking=True)


def lr_lambda(total_steps: int, warmup_fraction: float = 0.1):
    """Linear warm-up, then linear decay to 0 at `total_steps` (M3AE's schedule, power 1)."""
    warm = max(1, round(total_steps * warmup_fraction))

    def f(step):
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total_steps - step) / max(1, total_steps - warm))
    return f


# -- the loss accumulator: a running sum per epoch, kept one of three ways ----
def _add_tensor(total, loss):
    return total + loss           # keeps every step's autograd node alive


def _add_item(total, loss):
    return total + loss.item()    # note: a CPU-GPU sync point, every step


def _add_detached(total, loss):
    return total + loss.detach()  # stays on the device; read once per epoch


LOSS_ADDS = {"tensor": _add_tensor, "item": _add_item, "detach": _add_detached}


class LossSum:
    """One epoch's running loss; `add` is one of `LOSS_ADDS` (option `loss_accum`)."""

    def __init__(self, add):
        self._add, self.total = add, 0

    def add(self, loss) -> None:
        self.total = self._add(self.total, loss)

    def value(self) -> float:
        t = self.total
        return float(t.detach() if torch.is_tensor(t) else t)


class Log:
    """The lines a rank logs; a rank that does not log (option `log_ranks`) keeps none."""

    def __init__(self, writes: bool):
        self.writes, self.lines = writes, []

    def __call__(self, line: str) -> None:
        if self.writes:
            self.lines.append(line)


@dataclasses.dataclass
class EpochEdges:
    """What happens at an epoch's start and end: `model.train()` or not, the
    sampler's `set_epoch` or not, epochs timed between barriers or not."""
    model: torch.nn.Module
    device: torch.device
    train_mode: bool                  # option train_mode_each_epoch
    set_epoch: Callable[[int], None] | None   # the sampler's, or None (no sampler / option off)
    barrier: bool                     # option barrier_timing

    def begin(self, epoch: int) -> float:
        """Ready the epoch; returns the seconds waited at the barrier (0 without one)."""
        if self.train_mode:
            self.model.train()
        if self.set_epoch is not None:
            self.set_epoch(epoch)
        if not self.barrier:
            return 0.0
        sync(self.device)
        t0 = time.perf_counter()
        dist.barrier()
        return time.perf_counter() - t0

    def end(self) -> None:
        """Close the epoch: the device's queued work done, then the barrier if timing."""
        sync(self.device)
        if self.barrier:
            dist.barrier()
