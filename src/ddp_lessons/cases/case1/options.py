"""Case 1's options: every setting the post, the answer and the fix disagree on.

`Options()` (= `Options.broken()`) reproduces the post; `Options.answer()`
applies the accepted answer's changes; `Options.fixed()` is the setup that
scales. Each field switches one thing, so the difference between two runs is
the fields that differ (`diff`). Every choice is checked when set:
`Options(batch="halve")` raises ValueError naming the field and the allowed values.
Roles (`Options.fields_by_role()`): workload model, batch_size, lr; measurement barrier_timing,
steps_limit, seed; every other field is a switch. Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from ...course import options as base
from ...course.options import measurement, switch, workload


@dataclasses.dataclass
class Options(base.Options):
    """Every setting the post, the answer and the fix disagree on. Defaults = the post.
    Defined in notebook 01_case1_broken."""
    model: Literal["tiny", "m3ae"] = workload("tiny", "tiny (CPU) | m3ae (about M3AE's size)")
    batch_size: int = workload(8, "the config's batch size (the one-GPU run's)", min=1)
    lr: float = workload(2e-4, "peak learning rate of the one-GPU run", above=0)
    setup: Literal["posted", "answer"] = switch(
        "posted", "claim 1: the sampler/init logic as posted | as the answer has it")
    wrap_when: Literal["always", "device_count>1"] = switch(
        "always", "wrap in DDP always | on the post's literal test")
    batch: Literal["same", "halved", "scale_lr"] = switch(
        "same", "claim 2: per-process batch kept | halved | kept with LR x world size")
    log_ranks: Literal["all", "rank0"] = switch("all", "claim 3: every rank logs | rank 0 only")
    num_workers: int | Literal["cores"] = switch(
        4, "claim 4: loader workers per process, or 'cores' (the cores per process)", min=0)
    loss_accum: Literal["tensor", "item", "detach"] = switch(
        "tensor", "total_loss += loss | loss.item() | loss.detach()")
    find_unused_parameters: bool = switch(True)
    drop_heads: bool = switch(False, "remove the MLM/ITM/MIM heads before wrapping")
    static_graph: bool = switch(False)
    schedule: Literal["entries", "steps"] = switch(
        "entries", "LR schedule sized from the entries | the steps this rank takes")
    evaluation: Literal["rank0", "distributed", "none"] = switch(
        "rank0", "evaluate on rank 0 (the post) | sharded over ranks | not at all")
    train_mode_each_epoch: bool = switch(
        False, "the post never calls model.train() after evaluation")
    set_epoch: bool = switch(True, "sampler.set_epoch(epoch) each epoch")
    barrier_timing: bool = measurement(
        False, "time epochs between barriers, device synchronised")
    bucket_cap_mb: float = switch(25.0, "DDP's gradient bucket size", above=0)
    gradient_as_bucket_view: bool = switch(False)
    amp: bool = switch(False, "torch.autocast to bfloat16 around the forward pass")
    comm_dtype: Literal["bf16", "fp16"] | None = switch(
        None, "all-reduce in bf16 / fp16 (a compression hook); None: as the gradients")
    pin_memory: bool = switch(False)
    persistent_workers: bool = switch(False)
    steps_limit: int | None = measurement(None, "stop each epoch after this many steps", min=1)
    seed: int = measurement(0)

    PRESETS = {
        "broken": {},   # the posted script
        # the accepted answer's changes, as written (heads still in the model)
        "answer": dict(setup="answer", find_unused_parameters=False, num_workers=8,
                       loss_accum="item", log_ranks="rank0"),
        # every fix, plus what the answer left out; barrier_timing only measures
        "fixed": dict(setup="answer", find_unused_parameters=False, drop_heads=True,
                      batch="scale_lr", num_workers="cores", loss_accum="detach",
                      log_ranks="rank0", schedule="steps", evaluation="distributed",
                      train_mode_each_epoch=True, barrier_timing=True,
                      gradient_as_bucket_view=True, pin_memory=True, persistent_workers=True),
    }

    @classmethod
    def broken(cls, **overrides) -> "Options":
        """The posted script."""
        return cls.preset("broken", **overrides)

    @classmethod
    def answer(cls, **overrides) -> "Options":
        """The accepted answer's changes, as written (heads still in the model)."""
        return cls.preset("answer", **overrides)

    @classmethod
    def fixed(cls, **overrides) -> "Options":
        """The setup that scales: every fix, plus what the answer left out."""
        return cls.preset("fixed", **overrides)


def parse_override(text: str) -> tuple[str, object]:
    """`--set` text -> (field, value) typed by the field: 'num_workers=cores' -> ('num_workers', 'cores').

    An unknown field or a value the field refuses raises ValueError.
    """
    return Options.parse_override(text)
