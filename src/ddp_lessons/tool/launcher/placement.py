"""`place(world_size)`: where a lesson's ranks run on this machine, said in one line.

NCCL with one GPU per rank when at least as many GPUs as ranks are visible;
gloo with every rank on the CPU otherwise (none visible, or too few). `launch`
with `backend=None` follows the same rule, so a notebook that asks for the
ranks it teaches with runs on a CPU-only machine, on one GPU and on several.
GPUs are counted without initialising CUDA in this process (see
`checks.visible_gpus`): a kernel that placed its ranks can still fork.
Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import dataclasses

from . import checks


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where `world_size` ranks run: `backend` "nccl" | "gloo", `device` "cuda" | "cpu"."""
    world_size: int
    backend: str
    device: str
    gpus_visible: int

    @property
    def accelerator(self) -> str:
        """Lightning's word for the device: "gpu" or "cpu"."""
        return "gpu" if self.device == "cuda" else "cpu"

    def describe(self) -> str:
        """One line: '3 ranks on gloo/CPU: 1 GPU visible (3 needed for NCCL)'."""
        ranks = _count(self.world_size, "rank")
        gpus = _count(self.gpus_visible, "GPU") + " visible"
        if self.backend == "nccl":
            each = "one GPU each" if self.world_size > 1 else "one GPU"
            return f"{ranks} on NCCL, {each}: {gpus}"
        if self.gpus_visible >= self.world_size:
            why = " (gloo asked for)"
        elif self.gpus_visible:
            why = f" ({self.world_size} needed for NCCL)"
        else:
            why = ""
        return f"{ranks} on gloo/CPU: {gpus}{why}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def place(world_size: int, backend: str | None = None, start_method: str = "spawn") -> Placement:
    """Where `world_size` ranks will run: a `Placement` (print `.describe()`).

    `backend=None`: NCCL, one GPU per rank, when visible GPUs >= world_size,
    else gloo on the CPU. An explicit backend is honoured, or refused with
    `LaunchConfigError` as `launch` refuses it (NCCL with too few GPUs).
    Defined in notebook 00_first_launch.
    """
    checks.check_world_size(world_size)
    checks.check_start_method(start_method)
    gpus = checks.visible_gpus(start_method)  # looked up at call time: tests replace it
    backend = checks.resolve_backend(backend, world_size, gpus)
    return Placement(world_size, backend, "cuda" if backend == "nccl" else "cpu", gpus)
