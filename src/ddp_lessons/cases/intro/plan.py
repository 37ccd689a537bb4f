"""Notebook 00's options turned into one rank's objects, once: the DDP-wrapped MLP, its optimizer, its
batches and the hook that sends its gradients (`build`). `train.train` then reads the plan, not the
options. Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

from ...course.toy import mlp
from ...tool import hooks, runtime
from ...tool.ddp import wrap_ddp
from .options import Options


@dataclasses.dataclass
class Plan:
    """What one rank's loop uses (`build`)."""
    device: torch.device
    model: torch.nn.Module           # DDP-wrapped
    optimizer: torch.optim.Optimizer
    batches: list                    # (x, y) per step, made up front: no loader in the timed loop
    hook: object                     # what sends the gradients (None: DDP's own all-reduce)


def build(o: Options) -> Plan:
    """The plan of one rank under `o`. Defined in notebook 00_first_launch."""
    torch.manual_seed(o.seed)  # same initial weights on every rank (DDP also broadcasts rank 0's)
    dev = runtime.device()
    model = wrap_ddp(mlp(o.width, o.depth).to(dev), dev, bucket_cap_mb=o.bucket_cap_mb)
    if o.ddp_logging:
        model._set_ddp_runtime_logging_sample_rate(1)  # DDP's own timings of every step, not every 100th
    g = torch.Generator().manual_seed(o.seed + dist.get_rank())  # each rank its own data
    batches = [(torch.randn(o.batch, 32, generator=g), torch.randn(o.batch, 1, generator=g))
               for _ in range(o.steps)]
    # What is sent is the hook's business (a cast, a known delay); the timer only wraps it.
    hook = hooks.delayed(hooks.compression_hook(o.comm_dtype), o.comm_delay_s)
    return Plan(dev, model, torch.optim.SGD(model.parameters(), lr=1e-3), batches, hook)
