"""Case 2's options: one run of the posted Lightning test. The defaults are the
posted script's; `Options.fixed()` switches each fix on by name.
Defined in notebook 04_case2_lightning.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Options:
    """One run of the case-2 test. The defaults are the posted script's."""
    batch_size: int = 256
    size: int = 5000              # samples in the dataset
    epochs: int = 200
    accumulate: int = 3           # accumulate_grad_batches
    width: int = 256
    depth: int = 3                # hidden layers (the post: fc1..fc3)
    randn_in_getitem: bool = True  # False: the data made once, as tensors
    fix_loss_shape: bool = False  # the post's MSELoss broadcasts (B,1,1) against (B,1) to (B,B,1)
    nvml: str = "step"            # "step": init/query/shutdown in every training_step; "off"
    log_every_step: bool = True   # False: self.log only every `log_every` steps
    log_every: int = 50
    val_every: int = 1            # validate every N epochs (0: never)
    val_batches: float | int = 1.0  # limit_val_batches (1.0: all 5,000 samples)
    train_batches: float | int = 1.0  # limit_train_batches (short lessons)
    lr: float = 0.01
    seed: int = 0

    @classmethod
    def fixed(cls, **kw) -> "Options":
        """The fixed test: tensors made once, no NVML, logging and validation rarely."""
        base = dict(randn_in_getitem=False, fix_loss_shape=True, nvml="off",
                    log_every_step=False, val_every=0, accumulate=1)
        return cls(**(base | kw))

    def replace(self, **kw) -> "Options":
        return dataclasses.replace(self, **kw)
