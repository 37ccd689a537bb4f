"""DDP and a parameter that gets no gradient: the error, at the default debug
level and at `TORCH_DISTRIBUTED_DEBUG=DETAIL`, which names the parameters.

The model carries a head `forward` never calls (`SmallResNet(with_unused_branch=True)`).
With `find_unused_parameters=False` DDP waits for that head's gradients; the
next iteration finds the reduction unfinished and raises. The message is kept
whole. DETAIL also checks every collective's shapes across ranks and slows
them down: for finding the bug, not for timing.
Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ...tool.ddp import wrap_ddp
from .model import SmallResNet


def _two_steps(width: int) -> str | None:
    torch.manual_seed(0)
    ddp = wrap_ddp(SmallResNet(width=width, with_unused_branch=True), torch.device("cpu"))
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    try:
        for _ in range(2):   # the error surfaces at the start of the second iteration
            F.cross_entropy(ddp(x), y).backward()
    except RuntimeError as exc:
        return str(exc)
    return None


def unused_parameter_errors(width: int = 8) -> dict:
    """The error DDP raises for the unused head, at debug levels OFF, INFO and DETAIL.
    Defined in notebook 07_diagnose_your_own_run."""
    out = {}
    for level in ("OFF", "INFO", "DETAIL"):
        os.environ["TORCH_DISTRIBUTED_DEBUG"] = level
        dist.set_debug_level_from_env()   # DDP reads the level when it is constructed
        out[level] = _two_steps(width)
    os.environ.pop("TORCH_DISTRIBUTED_DEBUG")
    dist.set_debug_level_from_env()
    return out


def unused_names(model: torch.nn.Module) -> list[str]:
    """Parameters that get no gradient from one forward and backward pass (found by running it).
    Defined in notebook 07_diagnose_your_own_run."""
    x = torch.randn(2, 3, 32, 32)
    model.zero_grad(set_to_none=True)
    model(x).sum().backward()
    return [n for n, p in model.named_parameters() if p.grad is None]
