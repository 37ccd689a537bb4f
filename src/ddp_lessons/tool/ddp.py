"""A model under DDP: the wrap, the module inside it, the gradient bytes it
all-reduces each step, and a device sync for timing boundaries.

A leaf of the tool: it imports nothing from ddp_lessons.
"""

from __future__ import annotations

import torch
from torch import nn


def wrap_ddp(model: nn.Module, device: torch.device, **ddp_kwargs) -> nn.Module:
    """DistributedDataParallel over `model`, one device per rank on GPUs."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None, **ddp_kwargs)


def unwrap(model: nn.Module) -> nn.Module:
    """The module inside a DDP wrapper (or the model itself)."""
    return getattr(model, "module", model)


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on CPUs)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # a CPU-GPU sync point: callers use it at boundaries only


def gradient_bytes(model: nn.Module, dtype: torch.dtype | None = None) -> int:
    """Bytes of gradient DDP all-reduces per step: every trainable parameter,
    used or not, at `dtype` (default: each parameter's own).
    Defined in notebook 01_case1_broken."""
    params = [p for p in unwrap(model).parameters() if p.requires_grad]
    if dtype is None:
        return sum(p.numel() * p.element_size() for p in params)
    itemsize = torch.empty((), dtype=dtype, device="meta").element_size()
    return sum(p.numel() for p in params) * itemsize
