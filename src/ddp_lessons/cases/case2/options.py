"""Case 2's options: one run of the posted Lightning test. The defaults are the
posted script's; `Options.fixed()` switches each fix on by name. Every choice
is checked when set: `Options(nvml="never")` raises ValueError naming the field
and the allowed values.

Roles (`Options.fields_by_role()`): workload batch_size, size, epochs, width, depth, lr; switch
accumulate, randn_in_getitem, fix_loss_shape, nvml, log_every_step, log_every, val_every;
measurement val_batches, train_batches, seed. Defined in notebook 04_case2_lightning.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from ...course import options as base
from ...course.options import measurement, switch, workload


@dataclasses.dataclass
class Options(base.Options):
    """One run of the case-2 test. The defaults are the posted script's. Defined in notebook 04_case2_lightning."""
    batch_size: int = workload(256, min=1)
    size: int = workload(5000, "samples in the dataset", min=1)
    epochs: int = workload(200, min=1)
    accumulate: int = switch(3, "accumulate_grad_batches", min=1)
    width: int = workload(256, min=1)
    depth: int = workload(3, "hidden layers (the post: fc1..fc3)", min=1)
    randn_in_getitem: bool = switch(True, "False: the data made once, as tensors")
    fix_loss_shape: bool = switch(
        False, "the post's MSELoss broadcasts (B,1,1) against (B,1) to (B,B,1)")
    nvml: Literal["step", "off"] = switch(
        "step", "step: NVML init/query/shutdown in every training_step | off")
    log_every_step: bool = switch(True, "False: self.log only every `log_every` steps")
    log_every: int = switch(50, min=1)
    val_every: int = switch(1, "validate every N epochs (0: never)", min=0)
    val_batches: float | int = measurement(
        1.0, "limit_val_batches: a fraction, or a count (1.0: all 5,000 samples)", min=1, fraction=True)
    train_batches: float | int = measurement(
        1.0, "limit_train_batches: a fraction, or a count (short lessons)", min=1, fraction=True)
    lr: float = workload(0.01, above=0)
    seed: int = measurement(0)

    PRESETS = {
        "posted": {},
        # tensors made once, no NVML, logging and validation rarely, no accumulation
        "fixed": dict(randn_in_getitem=False, fix_loss_shape=True, nvml="off",
                      log_every_step=False, val_every=0, accumulate=1),
    }

    @classmethod
    def posted(cls, **overrides) -> "Options":
        """The posted test."""
        return cls.preset("posted", **overrides)

    @classmethod
    def fixed(cls, **overrides) -> "Options":
        """The fixed test: tensors made once, no NVML, logging and validation rarely."""
        return cls.preset("fixed", **overrides)
