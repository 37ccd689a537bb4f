"""Case 1: the posted DDP script's training loop, one code path for every
setup (see `options`).
`train` is the worker: it runs under `ddp_lessons.launch` (gloo on CPUs,
NCCL on GPUs) and under torchrun (`python -m ddp_lessons case1 ...`) and
returns, per rank, what it measured. Workers print nothing; the notebook does.
Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .. import runtime
from ..common import gradient_bytes, sync, wrap_ddp
from ..hooks import compression_hook
from ..launcher import report_progress
from ..timing import StepTimer
from .data import VQAFeatureDataset, tiny_dataset
from .evaluate import ShardSampler, evaluate
from .model import count_parameters
from .options import Options
from .setup import (accumulate, build_model, loader_workers, lr_lambda, make_loader,
                    to_device, train_sampler)


# -- the worker ----------------------------------------------------------------
def train(options, data_root=None, epochs: int = 1, keep_qids: bool = True) -> dict:
    """Worker: the posted training loop under `options`; returns this rank's measurements.

    Keys: rank, world_size, backend, device, options, batch_size (per rank),
    lr_peak, num_workers, wrapped, steps_per_epoch, schedule_steps, lrs (per
    step), losses (per step), epochs (per epoch: samples, steps, qids,
    time_posted, time_synced, t_start, t_end, barrier_wait, eval, eval_time,
    loss), timer (StepTimer.result()), grad_bytes, params, log.
    Defined in notebook 01_case1_broken.
    """
    o = options if isinstance(options, Options) else Options(**options)
    dev = runtime.device()
    cuda = dev.type == "cuda"
    rank, world = dist.get_rank(), dist.get_world_size()
    root = data_root or tiny_dataset()["root"]
    trainset, testset = VQAFeatureDataset(root, "train"), VQAFeatureDataset(root, "test")
    log = [] if o.log_ranks == "rank0" and rank else ["Creating model"]
    model = build_model(o, trainset.num_answers, trainset.image_size, dev)
    wrapped = o.wrap_when == "always" or torch.cuda.device_count() > 1
    if wrapped:
        model = wrap_ddp(model, dev, find_unused_parameters=o.find_unused_parameters, static_graph=o.static_graph,
                    bucket_cap_mb=o.bucket_cap_mb, gradient_as_bucket_view=o.gradient_as_bucket_view)
    timer = StepTimer(model if wrapped else None, device=dev, hook=compression_hook(o.comm_dtype))
    sampler = train_sampler(o, trainset)
    bs = max(1, o.batch_size // world) if o.batch == "halved" else o.batch_size
    nw = loader_workers(o)
    train_loader = make_loader(o, trainset, bs, sampler, nw, cuda, shuffle=True)
    test_sampler = ShardSampler(len(testset), rank, world) if o.evaluation == "distributed" else None
    test_loader = make_loader(o, testset, bs, test_sampler, nw, cuda)
    steps = min(len(train_loader), o.steps_limit or len(train_loader))
    # "entries": sized as if this process read every entry (the post passes
    # len(trainset.entries)); "steps": the steps this rank really takes.
    total = (math.ceil(len(trainset.entries) / bs) if o.schedule == "entries" else steps) * epochs
    lr_peak = o.lr * world if o.batch == "scale_lr" else o.lr
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr_peak, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(total))
    lrs, losses, per_epoch = [], [], []
    for epoch in range(epochs):
        if o.train_mode_each_epoch:
            model.train()
        if sampler is not None and o.set_epoch:
            sampler.set_epoch(epoch)
        barrier_wait = 0.0
        if o.barrier_timing:
            sync(dev)
            t0 = time.perf_counter()
            dist.barrier()
            barrier_wait = time.perf_counter() - t0
        t_start = time.time()
        strat_time = time.time()  # the post's clock: host time, no device sync
        if o.log_ranks == "all" or rank == 0:
            log.append(f"Start running basic DDP example on rank {rank}.")
        total_loss, samples, qids = 0, 0, []
        for index, batch in enumerate(timer.data(itertools.islice(train_loader, steps))):
            with timer.phase("forward"):
                targets = to_device(batch, dev)
                with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=o.amp):
                    logits = model(batch)
                loss = F.binary_cross_entropy_with_logits(logits.float(), targets)
                total_loss = accumulate(total_loss, loss, o.loss_accum)
            with timer.phase("backward"):
                optimizer.zero_grad()
                loss.backward()
            with timer.phase("optimizer"):
                optimizer.step()
                lrs.append(scheduler.get_last_lr()[0])
                scheduler.step()
            timer.step_done()
            losses.append(loss.detach())  # read once, at the end of the run
            samples += len(batch["qid"])
            qids += batch["qid"] if keep_qids else []
            report_progress(epoch * steps + index + 1, epochs * steps)
        end_time = time.time()
        sync(dev)
        if o.barrier_timing:
            dist.barrier()
        t_end = time.time()
        ev, t_eval = None, time.perf_counter()
        if o.evaluation == "distributed":
            ev = evaluate(model, test_loader, dev, distributed=True, amp=o.amp)
        elif o.evaluation == "rank0" and rank == 0:
            ev = evaluate(model, test_loader, dev, amp=o.amp)  # the other rank runs on meanwhile
        t_eval = time.perf_counter() - t_eval
        per_epoch.append({"epoch": epoch, "samples": samples, "steps": index + 1, "qids": qids,
                          "time_posted": end_time - strat_time, "time_synced": t_end - t_start,
                          "t_start": t_start, "t_end": t_end, "barrier_wait": barrier_wait,
                          "eval": ev, "eval_time": t_eval, "loss": float(total_loss.detach() if torch.is_tensor(total_loss) else total_loss)})
        if ev is not None and (o.log_ranks == "all" or rank == 0):
            log.append("overall: %.4f,  open: %.4f,  close: %.4f" % (ev["overall"], ev["open"], ev["closed"]))
    out = {"rank": rank, "world_size": world, "backend": dist.get_backend(), "device": str(dev),
           "options": dataclasses.asdict(o), "batch_size": bs, "lr_peak": lr_peak,
           "num_workers": nw, "wrapped": wrapped, "steps_per_epoch": steps, "schedule_steps": total,
           "lrs": lrs, "losses": torch.stack(losses).float().cpu().tolist() if losses else [],
           "epochs": per_epoch, "timer": timer.result(), "grad_bytes": gradient_bytes(model),
           "params": count_parameters(model), "log": log, "threads": torch.get_num_threads()}
    if cuda:
        out["max_memory_bytes"] = torch.cuda.max_memory_allocated(dev)
    return out


def train_many(option_list, data_root=None, epochs: int = 1) -> list[dict]:
    """Worker: `train` once per options, one after the other, in the same
    process group: a sweep without paying a launch per setting."""
    out = []
    for o in option_list:
        out.append(train(o, data_root, epochs, keep_qids=False))
        dist.barrier()  # every rank done with this DDP model before the next
    return out
