"""Case 1: the posted DDP script's training loop, one code path for every
setup (see `options`). `plan.build` turns the options into a `Plan` once;
`run_epoch` reads only the plan; `result` assembles what comes back.
`train` is the worker: it runs under `ddp_lessons.launch` (gloo on CPUs,
NCCL on GPUs) and under torchrun (`python -m ddp_lessons case1 ...`) and
returns, per rank, what it measured. Workers print nothing; the notebook does.
Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import dataclasses
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import Subset
from torch.utils.data.distributed import DistributedSampler

from ...course.replay import stored_or_live
from ...tool import runtime
from ...tool.ddp import gradient_bytes
from ...tool.launcher import launch, report_progress
from ...tool.timing import StepTimer
from .model import count_parameters
from .options import Options
from .loop import LOSS_ADDS, LossSum, graph_nodes, to_device
from .plan import Plan, build, build_model, make_loader
from .evaluate import SAMPLERS, ShardSampler, always_answer_most_frequent, evaluate
from .data import VQAFeatureDataset
from .readout import per_rank
from .synthetic import gpu_dataset, tiny_dataset


@dataclasses.dataclass
class Trace:
    """What the loop records across epochs: per step, per epoch."""
    lrs: list = dataclasses.field(default_factory=list)
    losses: list = dataclasses.field(default_factory=list)   # detached tensors, read at the end
    epochs: list = dataclasses.field(default_factory=list)


# -- the worker ----------------------------------------------------------------
def train(options, data_root=None, epochs: int = 1, keep_qids: bool = True, run_start="process",
          timer_mode: str | None = None) -> dict:
    """Worker: the posted training loop under `options`; returns this rank's measurements.

    Keys: rank, world_size, backend, device, options, batch_size (per rank),
    lr_peak, num_workers, wrapped, steps_per_epoch, schedule_steps, lrs (per
    step), losses (per step), epochs (per epoch: samples, steps, qids,
    time_posted, time_synced, t_start, t_end, barrier_wait, eval, eval_time,
    loss), timer (StepTimer.result()), grad_bytes, params, log, threads, and
    ddp (DDP's logging data: has_rebuilt_buckets, unused_parameter_size, static_graph),
    max_memory_bytes on CUDA (this run's peak). `run_start`: where this run's start-up began, for its
    timer ("process": the process's start; `train_many` gives each later run its own); `timer_mode`:
    the StepTimer's (None: its default; "full" keeps every bucket's ready time on a GPU too).
    Defined in notebook 01_case1_broken.
    """
    o = options if isinstance(options, Options) else Options(**options)
    plan, timer = build(o, data_root, epochs, keep_qids, run_start, timer_mode)   # the only place options are read
    trace = Trace()
    for epoch in range(epochs):
        trace.epochs.append(run_epoch(plan, timer, epoch, trace))
    return result(o, plan, timer, trace)


def run_epoch(plan: Plan, timer: StepTimer, epoch: int, trace: Trace) -> dict:
    """One epoch as the post runs it, with the plan's pieces; appends each
    step's LR and loss to `trace` and returns the epoch's row. Defined in notebook 01_case1_broken."""
    barrier_wait = plan.edges.begin(epoch)
    t_start = time.time()
    strat_time = time.time()  # the post's clock: host time, no device sync
    plan.log(f"Start running basic DDP example on rank {plan.rank}.")
    total_loss, samples, qids = plan.loss_sum(), 0, []
    # the loader itself goes to the timer (diagnose reads its settings); the loop stops at plan.steps
    for index, batch in enumerate(timer.data(plan.train_loader)):
        loss = train_step(plan, timer, batch, total_loss, trace.lrs)
        trace.losses.append(loss.detach())  # read once, at the end of the run
        samples += len(batch["qid"])
        qids += batch["qid"] if plan.keep_qids else []
        report_progress(epoch * plan.steps + index + 1, plan.epochs * plan.steps)
        if index + 1 == plan.steps:
            break
    end_time = time.time()
    plan.edges.end()
    t_end = time.time()
    t_eval = time.perf_counter()
    with timer.outside("evaluation"):  # work between epochs: the timer keeps it under its name
        ev = plan.evaluate()
    t_eval = time.perf_counter() - t_eval
    if ev is not None:
        plan.log("overall: %.4f,  open: %.4f,  close: %.4f" % (ev["overall"], ev["open"], ev["closed"]))
    return {"epoch": epoch, "samples": samples, "steps": index + 1, "qids": qids,
            "time_posted": end_time - strat_time, "time_synced": t_end - t_start,
            "t_start": t_start, "t_end": t_end, "barrier_wait": barrier_wait,
            "eval": ev, "eval_time": t_eval, "loss": total_loss.value()}


def train_step(plan: Plan, timer: StepTimer, batch: dict, total_loss, lrs: list) -> torch.Tensor:
    """One optimizer step as the post makes it, each phase timed; returns the step's loss.
    Defined in notebook 01_case1_broken."""
    with timer.phase("forward"):
        targets = to_device(batch, plan.device)
        with plan.autocast():
            logits = plan.model(batch)
        loss = F.binary_cross_entropy_with_logits(logits.float(), targets)
        total_loss.add(loss)
    with timer.phase("backward"):
        plan.optimizer.zero_grad()
        loss.backward()
    with timer.phase("optimizer"):
        plan.optimizer.step()
        lrs.append(plan.scheduler.get_last_lr()[0])
        plan.scheduler.step()
    timer.step_done()
    return loss


def result(o: Options, plan: Plan, timer: StepTimer, trace: Trace) -> dict:
    """This rank's returned dict (keys: see `train`)."""
    out = {"rank": plan.rank, "world_size": plan.world_size, "backend": dist.get_backend(),
           "device": str(plan.device), "options": dataclasses.asdict(o), "batch_size": plan.batch_size,
           "lr_peak": plan.lr_peak, "num_workers": plan.num_workers, "wrapped": plan.wrapped,
           "steps_per_epoch": plan.steps, "schedule_steps": plan.schedule_steps, "lrs": trace.lrs,
           "losses": torch.stack(trace.losses).float().cpu().tolist() if trace.losses else [],
           "epochs": trace.epochs, "timer": timer.result(), "grad_bytes": gradient_bytes(plan.model),
           "params": count_parameters(plan.model), "log": plan.log.lines, "threads": torch.get_num_threads()}
    if plan.wrapped:  # DDP's own account: did it rebuild its buckets in ready order, unused bytes found
        d = plan.model._get_ddp_logging_data()
        out["ddp"] = {k: d.get(k) for k in ("has_rebuilt_buckets", "unused_parameter_size", "static_graph")}
    if plan.device.type == "cuda":
        out["max_memory_bytes"] = torch.cuda.max_memory_allocated(plan.device)
    return out


def train_many(option_list, data_root=None, epochs: int = 1) -> list[dict]:
    """Worker: `train` once per options, one after the other, in the same
    process group: a sweep without paying a launch per setting. Defined in notebook 02_case1_answer."""
    out = []
    for i, o in enumerate(option_list):
        # Each run's start-up is its own: the first pays the process's start, the others
        # only their own set-up (not the runs before them).
        start = "process" if i == 0 else time.perf_counter()
        out.append(train(o, data_root, epochs, keep_qids=False, run_start=start))
        dist.barrier()  # every rank done with this DDP model before the next
    return out


def evaluate_worker(options, data_root=None, distributed: bool = True, sampler: str = "shard",
                    limit: int | None = None, fixture: bool = False) -> dict:
    """Worker: build the model of `options` (seeded, untrained) and evaluate it,
    on this rank's shard with the counts summed over ranks (`distributed`),
    or over the whole test set on every rank. `sampler`: "shard" (each
    question on exactly one rank) or "padded" (DistributedSampler, which pads
    with repeats to a multiple of the ranks); `limit`: only the first `limit`
    test questions; `fixture`: the model always gives the most frequent
    training answer (`always_answer_most_frequent`). Notebook 02_case1_answer
    compares single and distributed counts. Defined in notebook 02_case1_answer."""
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler={sampler!r}: use one of {SAMPLERS}")
    o = options if isinstance(options, Options) else Options(**options)
    dev = runtime.device()
    root = data_root or tiny_dataset()["root"]
    testset = VQAFeatureDataset(root, "test")
    model = build_model(o, testset.num_answers, testset.image_size, dev)
    if fixture:
        always_answer_most_frequent(model, VQAFeatureDataset(root, "train"))
    data = Subset(testset, range(min(limit or len(testset), len(testset))))
    data.collote = testset.collote
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    shards = (ShardSampler(len(data), rank, world) if sampler == "shard"
              else DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False))
    loader = make_loader(o.replace(num_workers=0), data, o.batch_size, shards, 0, dev.type == "cuda")
    return evaluate(model, loader, dev, distributed=distributed, amp=o.amp)


def history_kept(loss_accum: str, steps: int = 3, batch_size: int = 4) -> list[int]:
    """In this process, no DDP: `steps` training steps of the tiny model with the loss summed as option
    `loss_accum` says; after each step, how many autograd nodes the running sum keeps reachable
    (`loop.graph_nodes`). Defined in notebook 02_case1_answer."""
    o = Options.fixed(loss_accum=loss_accum)
    trainset = VQAFeatureDataset(tiny_dataset()["root"], "train")
    model = build_model(o, trainset.num_answers, trainset.image_size, torch.device("cpu"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=o.lr)
    total, kept = LossSum(LOSS_ADDS[loss_accum]), []
    for i in range(steps):
        batch = trainset.collote([trainset[j] for j in range(i * batch_size, (i + 1) * batch_size)])
        targets = to_device(batch, torch.device("cpu"))
        loss = F.binary_cross_entropy_with_logits(model(batch).float(), targets)
        total.add(loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        kept.append(graph_nodes(total.total))
    return kept


# -- a recorded GPU run, made again where GPUs are visible ----------------------
def remake(config: dict, where) -> dict:
    """The results of the run a case-1 record's `config` describes (its options and epochs, on the
    M3AE-size dataset at 224 px, made once), made on `where`'s ranks: what `course.replay` calls."""
    # Records made before options were checked wrote "--set evaluation=none" as None.
    options = {k: ("none" if k == "evaluation" and v is None else v) for k, v in config["options"].items()}
    out = launch(train, (options, str(gpu_dataset()["root"]), config["epochs"]), world_size=where.world_size,
                 backend=where.backend, timeout=900)
    return {"ranks": out, "per_rank": per_rank(out)}


def recorded(name: str, where) -> dict:
    """The case-1 record `name` (data/runs), or, where `where` (a `ddp_lessons.place` result) runs on
    NCCL, the same run made live on this machine's GPUs (`course.replay.stored_or_live`).
    Defined in notebook 01_case1_broken."""
    return stored_or_live(name, remake, where, kind="case1")
