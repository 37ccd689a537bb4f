"""Case 1's options: every setting the post, the answer and the fix disagree on.

`Options()` (= `Options.broken()`) reproduces the post; `Options.answer()`
applies the accepted answer's changes; `Options.fixed()` is the setup that
scales. Each field switches one thing, so the difference between two runs is
the fields that differ (`diff`). Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Options:
    """Every setting the post, the answer and the fix disagree on. Defaults = the post."""
    model: str = "tiny"                 # "tiny" (CPU) | "m3ae" (about M3AE's size)
    batch_size: int = 8                 # the config's batch size (the one-GPU run's)
    lr: float = 2e-4
    setup: str = "posted"               # claim 1: "posted" sampler/init logic | "answer"
    wrap_when: str = "always"           # "always" | "device_count>1" (the post's literal test)
    batch: str = "same"                 # claim 2: "same" | "halved" | "scale_lr"
    log_ranks: str = "all"              # claim 3: "all" ranks log | "rank0"
    num_workers: int | str = 4          # claim 4: int, or "cores" (the cores per process)
    loss_accum: str = "tensor"          # "tensor" (+= loss) | "item" (+= loss.item()) | "detach"
    find_unused_parameters: bool = True
    drop_heads: bool = False            # remove the MLM/ITM/MIM heads before wrapping
    static_graph: bool = False
    schedule: str = "entries"           # LR schedule sized from "entries" | "steps" per rank
    evaluation: str = "rank0"           # "rank0" (the post) | "distributed" | "none"
    train_mode_each_epoch: bool = False  # the post never calls model.train() after evaluation
    set_epoch: bool = True
    barrier_timing: bool = False        # time epochs between barriers, device synchronised
    bucket_cap_mb: float = 25.0
    gradient_as_bucket_view: bool = False
    amp: bool = False                   # torch.autocast to bfloat16 around the forward pass
    comm_dtype: str | None = None       # all-reduce in "bf16" / "fp16" (a compression hook)
    pin_memory: bool = False
    persistent_workers: bool = False
    steps_limit: int | None = None      # stop each epoch after this many steps
    seed: int = 0

    @classmethod
    def broken(cls, **overrides) -> "Options":
        """The posted script."""
        return cls(**overrides)

    @classmethod
    def answer(cls, **overrides) -> "Options":
        """The accepted answer's changes, as written (heads still in the model)."""
        return cls(**{**dict(setup="answer", find_unused_parameters=False, num_workers=8,
                             loss_accum="item", log_ranks="rank0"), **overrides})

    @classmethod
    def fixed(cls, **overrides) -> "Options":
        """The setup that scales: every fix, plus what the answer left out."""
        return cls(**{**dict(setup="answer", find_unused_parameters=False, drop_heads=True,
                             batch="scale_lr", num_workers="cores", loss_accum="detach",
                             log_ranks="rank0", schedule="steps", evaluation="distributed",
                             train_mode_each_epoch=True, barrier_timing=True,
                             gradient_as_bucket_view=True, pin_memory=True,
                             persistent_workers=True), **overrides})

    @classmethod
    def preset(cls, name: str, **overrides) -> "Options":
        if name not in ("broken", "answer", "fixed"):
            raise ValueError(f"preset {name!r}: use broken, answer or fixed")
        return getattr(cls, name)(**overrides)

    def replace(self, **changes) -> "Options":
        return dataclasses.replace(self, **changes)

    def diff(self, other: "Options") -> dict:
        """Fields whose values differ: name -> (self's, other's)."""
        a, b = dataclasses.asdict(self), dataclasses.asdict(other)
        return {k: (a[k], b[k]) for k in a if a[k] != b[k]}


def parse_override(text: str) -> tuple[str, object]:
    """'find_unused_parameters=false' -> ('find_unused_parameters', False), typed by the field."""
    key, sep, raw = text.partition("=")
    kinds = {f.name: f.default for f in dataclasses.fields(Options)}
    if not sep or key not in kinds:
        raise ValueError(f"--set {text!r}: use NAME=VALUE with NAME one of {sorted(kinds)}")
    low = raw.strip().lower()
    if low in ("none", "null"):
        return key, None
    if isinstance(kinds[key], bool):
        if low not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"--set {text!r}: {key} takes true or false")
        return key, low in ("true", "1", "yes")
    for cast in (int, float):
        try:
            return key, cast(raw)
        except ValueError:
            pass
    return key, raw
