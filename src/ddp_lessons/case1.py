"""Case 1: the posted DDP script's training loop, every proposed fix a named option.

One code path. `Case1Options()` (= `Case1Options.broken()`) reproduces the
post; `Case1Options.answer()` applies the accepted answer's changes;
`Case1Options.fixed()` is the setup that scales. Each field switches one
thing, so the difference between two runs is the fields that differ.
`train_case1` is the worker: it runs under `ddp_lessons.launch` (gloo on CPUs,
NCCL on GPUs) and under torchrun (`python -m ddp_lessons case1 ...`) and
returns, per rank, what it measured. Workers print nothing; the notebook does.
Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler
from torch.utils.data.distributed import DistributedSampler

from . import runtime
from ._worker import report_progress
from .timing import StepTimer
from .vqa_data import VQAFeatureDataset, make_vqa_dataset
from .vqa_model import (M3AEConfig, M3AETransformerSS, count_parameters,
                        drop_unused_heads, gradient_bytes)

DATA_DIR = Path(__file__).resolve().parents[2] / "data"
# The CPU default: small enough that a notebook runs several launches in ~40 s.
TINY_DATA = dict(n_images=64, n_qa=400, image_size=64)
COMM_DTYPES = {None: None, "none": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclasses.dataclass
class Case1Options:
    """Every setting the post, the answer and the fix disagree on. Defaults = the post."""
    model: str = "tiny"                 # "tiny" (CPU) | "m3ae" (about M3AE's size)
    batch_size: int = 8                 # the config's batch size (the one-GPU run's)
    lr: float = 2e-4
    setup: str = "posted"               # claim 1: "posted" sampler/init logic | "answer"
    wrap_when: str = "always"           # "always" | "device_count>1" (the post's literal test)
    batch: str = "same"                 # claim 2: "same" | "halved" | "scale_lr"
    log_ranks: str = "all"              # claim 3: "all" ranks log | "rank0"
    num_workers: int | str = 4          # claim 4: int, or "cores" (the cores per process)
    loss_accum: str = "tensor"          # "tensor" (+= loss) | "item" (+= loss.item()) | "detach"
    find_unused_parameters: bool = True
    drop_heads: bool = False            # remove the MLM/ITM/MIM heads before wrapping
    static_graph: bool = False
    schedule: str = "entries"           # LR schedule sized from "entries" | "steps" per rank
    evaluation: str = "rank0"           # "rank0" (the post) | "distributed" | "none"
    train_mode_each_epoch: bool = False  # the post never calls model.train() after evaluation
    set_epoch: bool = True
    barrier_timing: bool = False        # time epochs between barriers, device synchronised
    bucket_cap_mb: float = 25.0
    gradient_as_bucket_view: bool = False
    amp: bool = False                   # torch.autocast to bfloat16 around the forward pass
    comm_dtype: str | None = None       # all-reduce in "bf16" / "fp16" (a compression hook)
    pin_memory: bool = False
    persistent_workers: bool = False
    steps_limit: int | None = None      # stop each epoch after this many steps
    seed: int = 0

    @classmethod
    def broken(cls, **overrides) -> "Case1Options":
        """The posted script."""
        return cls(**overrides)

    @classmethod
    def answer(cls, **overrides) -> "Case1Options":
        """The accepted answer's changes, as written (heads still in the model)."""
        return cls(**{**dict(setup="answer", find_unused_parameters=False, num_workers=8,
                             loss_accum="item", log_ranks="rank0"), **overrides})

    @classmethod
    def fixed(cls, **overrides) -> "Case1Options":
        """The setup that scales: every fix, plus what the answer left out."""
        return cls(**{**dict(setup="answer", find_unused_parameters=False, drop_heads=True,
                             batch="scale_lr", num_workers="cores", loss_accum="detach",
                             log_ranks="rank0", schedule="steps", evaluation="distributed",
                             train_mode_each_epoch=True, barrier_timing=True,
                             gradient_as_bucket_view=True, pin_memory=True,
                             persistent_workers=True), **overrides})

    @classmethod
    def preset(cls, name: str, **overrides) -> "Case1Options":
        if name not in ("broken", "answer", "fixed"):
            raise ValueError(f"preset {name!r}: use broken, answer or fixed")
        return getattr(cls, name)(**overrides)

    def replace(self, **changes) -> "Case1Options":
        return dataclasses.replace(self, **changes)

    def diff(self, other: "Case1Options") -> dict:
        """Fields whose values differ: name -> (self's, other's)."""
        a, b = dataclasses.asdict(self), dataclasses.asdict(other)
        return {k: (a[k], b[k]) for k in a if a[k] != b[k]}


def parse_override(text: str) -> tuple[str, object]:
    """'find_unused_parameters=false' -> ('find_unused_parameters', False), typed by the field."""
    key, sep, raw = text.partition("=")
    kinds = {f.name: f.default for f in dataclasses.fields(Case1Options)}
    if not sep or key not in kinds:
        raise ValueError(f"--set {text!r}: use NAME=VALUE with NAME one of {sorted(kinds)}")
    low = raw.strip().lower()
    if low in ("none", "null"):
        return key, None
    if isinstance(kinds[key], bool):
        if low not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"--set {text!r}: {key} takes true or false")
        return key, low in ("true", "1", "yes")
    for cast in (int, float):
        try:
            return key, cast(raw)
        except ValueError:
            pass
    return key, raw


def tiny_dataset(root=None) -> dict:
    """Make (once) the CPU default dataset in data/vqa_tiny; returns make_vqa_dataset's summary."""
    return make_vqa_dataset(root or DATA_DIR / "vqa_tiny", **TINY_DATA)


# -- the pieces of the loop ----------------------------------------------------
class ShardSampler(Sampler):
    """Indices rank, rank + world, ...: every sample on exactly one rank, no padding
    (DistributedSampler pads with repeats, which would count some samples twice)."""

    def __init__(self, n: int, rank: int, world: int):
        self.indices = list(range(rank, n, world))

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return len(self.indices)


def _model(o: Case1Options, num_answers: int, image_size: int, dev) -> torch.nn.Module:
    base = M3AEConfig.m3ae if o.model == "m3ae" else M3AEConfig.tiny
    torch.manual_seed(o.seed)  # same weights on every rank (DDP broadcasts rank 0's anyway)
    model = M3AETransformerSS(base(num_answers=num_answers, image_size=image_size))
    if o.drop_heads:
        drop_unused_heads(model)
    return model.to(dev)


def _sampler(o: Case1Options, trainset):
    if o.setup == "posted":
        # As posted: LOCAL_RANK decides whether init_process_group ran (under
        # a launcher it did, before this line), the rank given is LOCAL_RANK.
        local_rank = int(os.environ.get("LOCAL_RANK", -1))
        word_size = dist.get_world_size()  # raises when the group was never initialised
        return DistributedSampler(trainset, num_replicas=word_size, rank=local_rank, seed=o.seed)
    if dist.is_initialized():
        return DistributedSampler(trainset, seed=o.seed)  # rank and size from the group
    return None


def _workers(o: Case1Options) -> int:
    if o.num_workers == "cores":
        return max(0, runtime.cpu_count() // int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
    return int(o.num_workers)


def _loader(o, ds, bs, sampler, nw, cuda, shuffle=False):
    return DataLoader(ds, batch_size=bs, sampler=sampler, shuffle=shuffle and sampler is None,
                      num_workers=nw, collate_fn=ds.collote, pin_memory=o.pin_memory and cuda,
                      persistent_workers=o.persistent_workers and nw > 0,
                      generator=torch.Generator().manual_seed(o.seed),
                      # fork, as under torchrun: a spawned rank would otherwise spawn its
                      # loader workers too, each importing torch (seconds per epoch)
                      multiprocessing_context="fork" if nw and sys.platform == "linux" else None)


def _to_device(batch: dict, dev) -> torch.Tensor:
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


def _sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)  # note: CPU-GPU sync point, only at epoch boundaries


@torch.no_grad()
def evaluate(model, loader, dev, distributed: bool = False, amp: bool = False) -> dict:
    """Overall / open / closed accuracy (argmax vs the top label), as the post scores it.

    `distributed=True`: every rank scores its own shard and the counts are
    summed over ranks, so every rank returns the whole test set's result.
    """
    model.eval()
    counts = torch.zeros(4, dtype=torch.long, device=dev)  # open n, open right, closed n, closed right
    for batch in loader:
        targets = _to_device(batch, dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            logits = model(batch)
        right = (logits.argmax(1) == targets.argmax(1)).long()
        closed = torch.tensor([t == "CLOSED" for t in batch["answer_types"]], device=dev)
        counts += torch.stack([(~closed).sum(), (right * ~closed).sum(), closed.sum(), (right * closed).sum()])
    if distributed:
        dist.all_reduce(counts)
    on, oc, cn, cc = counts.tolist()
    return {"overall": (oc + cc) / max(1, on + cn), "open": oc / max(1, on),
            "closed": cc / max(1, cn), "n": on + cn, "counts": [on, oc, cn, cc]}


def _accumulate(total, loss, how):
    if how == "tensor":
        return total + loss           # keeps every step's autograd node alive
    if how == "item":
        return total + loss.item()    # note: a CPU-GPU sync point, every step
    return total + loss.detach()      # stays on the device; read once per epoch


# -- the worker ----------------------------------------------------------------
def train_case1(options, data_root=None, epochs: int = 1, keep_qids: bool = True) -> dict:
    """Worker: the posted training loop under `options`; returns this rank's measurements.

    Keys: rank, world_size, backend, device, options, batch_size (per rank),
    lr_peak, num_workers, wrapped, steps_per_epoch, schedule_steps, lrs (per
    step), losses (per step), epochs (per epoch: samples, steps, qids,
    time_posted, time_synced, t_start, t_end, barrier_wait, eval, eval_time,
    loss), timer (StepTimer.result()), grad_bytes, params, log.
    Defined in notebook 01_case1_broken.
    """
    o = options if isinstance(options, Case1Options) else Case1Options(**options)
    dev = runtime.device()
    cuda = dev.type == "cuda"
    rank, world = dist.get_rank(), dist.get_world_size()
    root = data_root or tiny_dataset()["root"]
    trainset, testset = VQAFeatureDataset(root, "train"), VQAFeatureDataset(root, "test")
    log = [] if o.log_ranks == "rank0" and rank else ["Creating model"]
    model = _model(o, trainset.num_answers, trainset.image_size, dev)
    wrapped = o.wrap_when == "always" or torch.cuda.device_count() > 1
    if wrapped:
        model = DDP(model, device_ids=[dev.index] if cuda else None,
                    find_unused_parameters=o.find_unused_parameters, static_graph=o.static_graph,
                    bucket_cap_mb=o.bucket_cap_mb, gradient_as_bucket_view=o.gradient_as_bucket_view)
    timer = StepTimer(model if wrapped else None, device=dev, comm_dtype=COMM_DTYPES[o.comm_dtype])
    sampler = _sampler(o, trainset)
    bs = max(1, o.batch_size // world) if o.batch == "halved" else o.batch_size
    nw = _workers(o)
    train_loader = _loader(o, trainset, bs, sampler, nw, cuda, shuffle=True)
    test_sampler = ShardSampler(len(testset), rank, world) if o.evaluation == "distributed" else None
    test_loader = _loader(o, testset, bs, test_sampler, nw, cuda)
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
            _sync(dev)
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
                targets = _to_device(batch, dev)
                with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=o.amp):
                    logits = model(batch)
                loss = F.binary_cross_entropy_with_logits(logits.float(), targets)
                total_loss = _accumulate(total_loss, loss, o.loss_accum)
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
        _sync(dev)
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


def train_case1_many(option_list, data_root=None, epochs: int = 1) -> list[dict]:
    """Worker: `train_case1` once per options, one after the other, in the same
    process group: a sweep without paying a launch per setting."""
    out = []
    for o in option_list:
        out.append(train_case1(o, data_root, epochs, keep_qids=False))
        dist.barrier()  # every rank done with this DDP model before the next
    return out


def evaluate_case1(options, data_root=None, distributed: bool = True) -> dict:
    """Worker: build the model of `options` (seeded, untrained) and evaluate it,
    on this rank's shard with the counts summed over ranks (`distributed`),
    or over the whole test set on every rank. Notebook 02_case1_answer
    compares the two."""
    o = options if isinstance(options, Case1Options) else Case1Options(**options)
    dev = runtime.device()
    testset = VQAFeatureDataset(data_root or tiny_dataset()["root"], "test")
    model = _model(o, testset.num_answers, testset.image_size, dev)
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    loader = _loader(o.replace(num_workers=0), testset, o.batch_size,
                     ShardSampler(len(testset), rank, world), 0, dev.type == "cuda")
    return evaluate(model, loader, dev, distributed=distributed, amp=o.amp)


# Reading the results and the post's no-launcher run live in their own modules; their names stay here.
from .case1_results import allreduce_time, by_run, epoch_span, per_rank, throughput, waited  # noqa: E402,F401
from .case1_posted import run_without_launcher  # noqa: E402,F401
