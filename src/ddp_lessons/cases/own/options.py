"""The workload's options: the habits a new user brings, each switched by one field.

`Options()` (= preset "broken") is the run as a new user writes it: every rank
evaluates the whole test set, no `set_epoch`, `loss.item()` and a print every
step, the batches made in the main process. Preset "fixed" changes exactly
those four (five fields: the loader's workers and their persistence);
"eval_sharded" only the first, the cost `diagnose` ranks first, so the next
cost can be measured after it. `diff` lists them. Every value is checked when set
(`Options(evaluation="rank0")` raises ValueError naming the allowed values).
Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from ...course import options as base
from ...course.options import measurement, switch, workload


@dataclasses.dataclass
class Options(base.Options):
    """The run of notebook 07. Defaults = the habits of a new user. Defined in notebook 07_diagnose_your_own_run."""
    width: int = workload(32, "channels of the first stage (ResNet-18: 64; 32 = half width)", min=1)
    batch_size: int = workload(32, "per-rank batch", min=1)
    train_size: int = workload(512, "training samples (split among ranks)", min=1)
    test_size: int = workload(512, "test samples", min=1)
    lr: float = workload(0.05, "SGD learning rate", above=0)
    epochs: int = workload(2, "epochs", min=1)
    evaluation: Literal["every_rank", "distributed", "none"] = switch(
        "every_rank", "every rank evaluates the whole test set | each its shard, summed | none")
    set_epoch: bool = switch(False, "sampler.set_epoch(epoch) each epoch (a new shuffle per epoch)")
    step_log: Literal["item_print", "none"] = switch(
        "item_print", "loss.item() and a print every step | nothing per step")
    num_workers: int | Literal["budget"] = switch(
        0, "loader worker processes per rank, or 'budget' (what the rank's core share allows)", min=0)
    persistent_workers: bool = switch(False, "keep the loader's workers between epochs (else each epoch "
                                             "starts them again, inside its first step)")
    unused_branch: bool = switch(False, "the model carries a head forward never calls")
    find_unused_parameters: bool = switch(False, "tell DDP to look for parameters without gradients")
    steps_limit: int | None = measurement(None, "stop each epoch after this many steps", min=1)
    seed: int = measurement(0)

    PRESETS = {
        "broken": {},
        "fixed": dict(evaluation="distributed", set_epoch=True, step_log="none", num_workers="budget",
                      persistent_workers=True),
        # the largest cost fixed alone: fix it, then measure again before the next
        "eval_sharded": dict(evaluation="distributed"),
    }

    @classmethod
    def broken(cls, **overrides):
        return cls.preset("broken", **overrides)

    @classmethod
    def fixed(cls, **overrides):
        return cls.preset("fixed", **overrides)
