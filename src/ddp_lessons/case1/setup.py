"""Case 1's setup: the options turned into objects once, a `Plan` (model,
optimizer, schedule, loader, loss accumulator, evaluator, log, epoch edges).
`train.run_epoch` then reads the plan and no option. Defined in notebook
01_case1_broken.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable

import torch
import torch.distributed as dist

from .. import runtime
from ..common import wrap_ddp
from ..hooks import compression_hook
from ..timing import StepTimer
from .data import VQAFeatureDataset
from .evaluate import ShardSampler, evaluate
from .options import Options
from .parts import (LOSS_ADDS, EpochEdges, Log, LossSum, build_model, lr_lambda, make_loader,
                    rank_budget, train_sampler)
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
    num_workers: int                  # loader workers per rank (parts.core_budget)
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


def build(o: Options, data_root=None, epochs: int = 1, keep_qids: bool = True) -> tuple[Plan, StepTimer]:
    """The plan of one rank's run under `o`, and the StepTimer on its model.

    Call order is the loop's contract: the seed is set right before the model
    is made, and the timer's comm hook is registered right after DDP wraps it.
    """
    dev = runtime.device()
    rank, world = dist.get_rank(), dist.get_world_size()
    # The rank's cores split between loader workers and intra-op threads
    # (parts.core_budget), set before any loader process is forked.
    nw, threads = rank_budget(o, dev.type)
    torch.set_num_threads(threads)
    root = data_root or tiny_dataset()["root"]
    trainset, testset = VQAFeatureDataset(root, "train"), VQAFeatureDataset(root, "test")
    log = Log(writes=o.log_ranks == "all" or rank == 0)
    log("Creating model")
    model, wrapped = _model(o, trainset, dev)
    bs = max(1, o.batch_size // world) if o.batch == "halved" else o.batch_size
    # ddp_logging: on a GPU the exposed all-reduce comes from DDP's own timings; their cost
    # (a wait on CUDA events per step, ~0.1 ms) is lost in case 1's 200 ms steps.
    timer = StepTimer(model if wrapped else None, device=dev, hook=compression_hook(o.comm_dtype),
                      batch_size=bs, ddp_logging=True)
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


def _model(o: Options, trainset, dev) -> tuple[torch.nn.Module, bool]:
    """The model (seeded), DDP-wrapped unless `wrap_when` says one device needs no wrapper."""
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
