"""What case 1's loop calls at every step and epoch edge, each switched by one
option: the batch moved to the device, the LR schedule, the loss accumulator,
the log, what happens at an epoch's edges. `plan.build` picks them from the
options once (with the model, sampler and loader); the loop then only calls
them. Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import torch
import torch.distributed as dist

from ...tool.ddp import sync


def to_device(batch: dict, dev) -> torch.Tensor:
    # The post's copies, made non-blocking (asynchronous only from pinned memory).
    """Defined in notebook 03_case1_beyond."""
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


def graph_nodes(total) -> int:
    """How many autograd nodes a running loss total keeps reachable (0 for a float or a detached tensor).
    Defined in notebook 02_case1_answer."""
    fn = getattr(total, "grad_fn", None)
    seen, todo = set(), [fn]
    while todo:
        f = todo.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        todo += [g for g, _ in f.next_functions]
    return len(seen)
