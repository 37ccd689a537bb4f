"""Case 1's setup: the options turned into objects once, a `Plan` (model,
optimizer, schedule, loader, loss accumulator, evaluator, log, epoch edges).
`train.run_epoch` then reads the plan and no option. Defined in notebook
01_case1_broken.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import sys
from typing import Callable

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from ...tool import runtime
from ...tool.ddp import wrap_ddp
from ...tool.hooks import compression_hook
from ...tool.timing import StepTimer
from .data import VQAFeatureDataset
from .evaluate import ShardSampler, evaluate
from .model import M3AEConfig, M3AETransformerSS, drop_unused_heads
from .options import Options
from .loop import LOSS_ADDS, EpochEdges, Log, LossSum, lr_lambda
from .synthetic import tiny_dataset


@dataclasses.dataclass
class Plan:
    """Everything one rank's training loop uses, built by `build`."""
    rank: int
    world_size: int
    device: torch.device
    model: torch.nn.Module            # DDP-wrapped when `wrapped`
    wrapped: bool
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    train_loader: torch.utils.data.DataLoader
    batch_size: int                   # per rank
    num_workers: int                  # loader workers per rank (core_budget)
    steps: int                        # per epoch
    epochs: int
    schedule_steps: int               # the length the LR schedule was sized for
    lr_peak: float
    loss_sum: Callable[[], LossSum]   # a fresh accumulator per epoch
    evaluate: Callable[[], dict | None]   # after each epoch; None where this rank does not
    log: Log
    edges: EpochEdges
    autocast: Callable                # a fresh autocast context per forward pass
    keep_qids: bool                   # record each epoch's qids (train's argument)


def build(o: Options, data_root=None, epochs: int = 1, keep_qids: bool = True,
          run_start="process", timer_mode: str | None = None) -> tuple[Plan, StepTimer]:
    """The plan of one rank's run under `o`, and the StepTimer on its model (`run_start`: where
    this run's start-up began; `timer_mode`: the timer's mode, None for its default).

    Call order is the loop's contract: the seed is set right before the model
    is made, and the timer's comm hook is registered right after DDP wraps it.
    """
    dev = runtime.device()
    rank, world = dist.get_rank(), dist.get_world_size()
    # The rank's cores split between loader workers and intra-op threads
    # (core_budget), set before any loader process is forked.
    nw, threads = rank_budget(o, dev.type)
    torch.set_num_threads(threads)
    if dev.type == "cuda":  # this run's peak, not the process's: several runs may share the process
        torch.cuda.reset_peak_memory_stats(dev)
    root = data_root or tiny_dataset()["root"]
    trainset, testset = VQAFeatureDataset(root, "train"), VQAFeatureDataset(root, "test")
    log = Log(writes=o.log_ranks == "all" or rank == 0)
    log("Creating model")
    model, wrapped = wrap_model(o, trainset, dev)
    bs = max(1, o.batch_size // world) if o.batch == "halved" else o.batch_size
    # ddp_logging: on a GPU the exposed all-reduce comes from DDP's own timings; their cost
    # (a wait on CUDA events per step, ~0.1 ms) is lost in case 1's 200 ms steps.
    timer = StepTimer(model if wrapped else None, device=dev, hook=compression_hook(o.comm_dtype),
                      batch_size=bs, ddp_logging=True, run_start=run_start, mode=timer_mode)
    sampler = train_sampler(o, trainset)
    train_loader = make_loader(o, trainset, bs, sampler, nw, dev.type == "cuda", shuffle=True)
    evaluator = _evaluator(o, model, testset, bs, nw, rank, world, dev)
    steps = min(len(train_loader), o.steps_limit or len(train_loader))
    # "entries": sized as if this process read every entry (the post passes
    # len(trainset.entries)); "steps": the steps this rank really takes.
    total = (math.ceil(len(trainset.entries) / bs) if o.schedule == "entries" else steps) * epochs
    lr_peak = o.lr * world if o.batch == "scale_lr" else o.lr
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr_peak, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(total))
    plan = Plan(rank=rank, world_size=world, device=dev, model=model, wrapped=wrapped,
                optimizer=optimizer, scheduler=scheduler, train_loader=train_loader,
                batch_size=bs, num_workers=nw, steps=steps, epochs=epochs, schedule_steps=total,
                lr_peak=lr_peak, loss_sum=functools.partial(LossSum, LOSS_ADDS[o.loss_accum]),
                evaluate=evaluator, log=log, keep_qids=keep_qids,
                edges=EpochEdges(model, dev, train_mode=o.train_mode_each_epoch, barrier=o.barrier_timing,
                                 set_epoch=sampler.set_epoch if sampler is not None and o.set_epoch else None),
                autocast=functools.partial(torch.autocast, dev.type, dtype=torch.bfloat16, enabled=o.amp))
    return plan, timer


def wrap_model(o: Options, trainset, dev) -> tuple[torch.nn.Module, bool]:
    """The model (seeded) and whether it is wrapped: in DDP unless `wrap_when` says one device needs
    no wrapper (the post's `torch.cuda.device_count() > 1`). Defined in notebook 01_case1_broken."""
    model = build_model(o, trainset.num_answers, trainset.image_size, dev)
    wrapped = o.wrap_when == "always" or torch.cuda.device_count() > 1
    if wrapped:
        model = wrap_ddp(model, dev, find_unused_parameters=o.find_unused_parameters, static_graph=o.static_graph,
                         bucket_cap_mb=o.bucket_cap_mb, gradient_as_bucket_view=o.gradient_as_bucket_view)
    return model, wrapped


def _no_evaluation() -> None:
    return None


def _evaluator(o: Options, model, testset, bs, nw, rank, world, dev) -> Callable[[], dict | None]:
    """Option `evaluation`: "distributed" (every rank its shard, counts summed),
    "rank0" (the post: rank 0 over the whole test set) or "none"."""
    shard = ShardSampler(len(testset), rank, world) if o.evaluation == "distributed" else None
    loader = make_loader(o, testset, bs, shard, nw, dev.type == "cuda")
    if o.evaluation == "distributed":
        return functools.partial(evaluate, model, loader, dev, distributed=True, amp=o.amp)
    if o.evaluation == "rank0" and rank == 0:
        # the other rank runs on meanwhile
        return functools.partial(evaluate, model, loader, dev, amp=o.amp)
    return _no_evaluation


def build_model(o: Options, num_answers: int, image_size: int, dev) -> torch.nn.Module:
    base = M3AEConfig.m3ae if o.model == "m3ae" else M3AEConfig.tiny
    torch.manual_seed(o.seed)  # same weights on every rank (DDP broadcasts rank 0's anyway)
    model = M3AETransformerSS(base(num_answers=num_answers, image_size=image_size))
    if o.drop_heads:
        drop_unused_heads(model)
    return model.to(dev)


def train_sampler(o: Options, trainset):
    """The training sampler: as posted (LOCAL_RANK, get_world_size) or as the answer has it (from the
    group, None without one). Defined in notebook 01_case1_broken."""
    if o.setup == "posted":
        # As posted: LOCAL_RANK decides whether init_process_group ran (under
        # a launcher it did, before this line), the rank given is LOCAL_RANK.
        local_rank = int(os.environ.get("LOCAL_RANK", -1))
        word_size = dist.get_world_size()  # raises when the group was never initialised
        return DistributedSampler(trainset, num_replicas=word_size, rank=local_rank, seed=o.seed)
    if dist.is_initialized():
        return DistributedSampler(trainset, seed=o.seed)  # rank and size from the group
    return None


def shards_on_nodes(n: int, nodes: int, gpus_per_node: int, posted: bool = True) -> dict:
    """What `DistributedSampler` gives each rank of `nodes` x `gpus_per_node` over `n` samples: as
    posted (`rank=LOCAL_RANK`, which repeats on every node) or from the group (the global rank):
    the distinct samples read and how many ranks read each. Defined in notebook 01_case1_broken."""
    world = nodes * gpus_per_node
    seen = []
    for rank in range(world):
        given = rank % gpus_per_node if posted else rank   # LOCAL_RANK, or the global rank
        seen += list(DistributedSampler(range(n), num_replicas=world, rank=given, shuffle=False))
    return {"ranks": world, "distinct": len(set(seen)), "reads_per_sample": len(seen) / len(set(seen))}


# Loader workers per GPU rank, at most: common practice is 4 to 8, tuned by the data wait
# (`StepTimer`'s data phase). One H200 rank on 16 cores was given 15 before this cap: nothing was left
# for the pin-memory thread, NCCL's proxy thread or the CUDA driver's.
MAX_GPU_WORKERS = 8


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
      workers = share - 1 (decoding JPEGs is what the loader spends CPU on),
      at most `MAX_GPU_WORKERS`;
    - CPU: the math is the step, so threads get most of the share and the
      workers a quarter of it, rounded up; a share of 1 core gets no worker
      (a worker would only take turns with the math on that core, so the
      batch is loaded in the rank's own process: 2 ranks on 2 cores).
    An explicit `num_workers` (the post's 4, the answer's 8) is kept as
    given: the threads then yield to it, down to 1. `thread_cap` (the
    OMP_NUM_THREADS the launcher set) lowers the threads further. Defined in notebook 03_case1_beyond."""
    share = max(1, cores // max(1, ranks))
    if num_workers == "cores":
        if device_type == "cuda":
            # capped: the rank's pin-memory thread, NCCL's proxy thread and the driver's need cores
            # of the share too; more workers than the data wait asks for only queue batches sooner
            workers = min(share - 1, MAX_GPU_WORKERS)
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
