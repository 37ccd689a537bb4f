"""Notebook 00's settings as checked options: `Options` (the small timed DDP model: what it trains, what
it sends, how it is timed; presets "breakdown", "check", "delayed") and `Sweep` (the all-reduce
sweep: sizes, iterations per size, warm-up; the interleaved rounds of the sizes its claim compares).
`Options(width=0)` raises a ValueError naming the field.
Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from ...course import options as base
from ...tool import allreduce
from ...course.options import measurement, switch, workload

MiB = 2**20


@dataclasses.dataclass
class Options(base.Options):
    """The timed MLP of notebook 00 (`train.train`). Defaults: a small model in one bucket.
    Defined in notebook 00_first_launch."""
    steps: int = measurement(20, "steps timed (the first 2 are left out of medians)", min=1)
    width: int = workload(256, "hidden width of the MLP", min=1)
    depth: int = workload(4, "hidden layers", min=1)
    batch: int = workload(64, "samples per step on each rank", min=1)
    bucket_cap_mb: float = switch(25.0, "DDP's gradient bucket size", above=0)
    comm_delay_s: float = switch(0.0, "a known delay per bucket after its all-reduce (hooks.delayed)", min=0)
    comm_dtype: Literal["bf16", "fp16"] | None = switch(None, "all-reduce in bf16 / fp16; None: as the gradients")
    timed: bool = measurement(True, "False: the same loop with the timer disabled")
    mode: Literal["full", "light"] | None = measurement(
        None, "the timer's mode: full (a comm hook times every bucket) | light (DDP's own timings) | None: "
        "the timer's default (light for DDP's own all-reduce on a GPU, else full)")
    ddp_logging: bool = measurement(False, "also return DDP's own timings of every step, to cross-check")
    seed: int = measurement(0)

    PRESETS = {
        # several buckets a step, so the all-reduce overlaps the backward
        "breakdown": {"steps": 20, "width": 512, "depth": 4, "batch": 64, "bucket_cap_mb": 1.0},
        # one bucket, with DDP's own clock beside the timer's
        "check": {"steps": 14, "width": 256, "depth": 2, "batch": 16, "mode": "full", "ddp_logging": True},
        "delayed": {"steps": 14, "width": 256, "depth": 2, "batch": 16, "mode": "full", "comm_delay_s": 0.05},
    }


@dataclasses.dataclass
class Sweep(base.Options):
    """The all-reduce sweep (`tool.allreduce.sweep`): powers of two from `lo` to `hi` bytes, each
    timed `iters` times after `warmup` untimed calls. Defined in notebook 00_first_launch."""
    lo: int = workload(4 * 1024, "smallest message in bytes", min=4)
    hi: int | None = workload(None, "largest message in bytes; None: 16 MiB on CPUs, 256 MiB on GPUs", min=8)
    iters: int = measurement(50, "timed all-reduces per size (each size's best is what the claims read)", min=1)
    warmup: int = measurement(10, "untimed all-reduces per size first (the first size starts cold)", min=0)
    rounds: int = measurement(150, "rounds of the four sizes the claim compares, interleaved", min=1)

    def largest(self, device: str = "cpu") -> int:
        """`hi`, or its default for ranks on `device` ("cpu", "cuda"): GPU links need larger messages
        before their bytes, not their latency, decide."""
        return self.hi or (16 * MiB if device == "cpu" else 256 * MiB)

    def sizes(self, device: str = "cpu") -> list[int]:
        """The message sizes, powers of two from `lo` to `largest(device)`."""
        return allreduce.default_sizes(self.lo, self.largest(device))

    def compared(self, device: str = "cpu") -> list[int]:
        """The four sizes the claim compares (`workers.interleaved`): 4 KiB and 64 KiB, a quarter of the
        largest and the largest."""
        big = self.largest(device)
        return [4 * 1024, 64 * 1024, big // 4, big]
