"""Which gradients DDP can all-reduce during the backward pass: the order in
which they become ready (`ready_order`), the buckets that order makes (`assign`), how many bytes
wait for the backward pass to end (`last_bucket_share`), and when a recorded run handed each bucket over
(`recorded_ready`). The first three are deterministic: sizes and order only, no
timing. Defined in notebook 03_case1_beyond.
"""

from __future__ import annotations

import torch

from ...tool.runs import Rank

MIB = 2**20


def ready_order(model: torch.nn.Module, batch: dict) -> list[tuple[str, int]]:
    """(name, gradient bytes) of every parameter, in the order one backward
    pass of `model` on `batch` made their gradients ready (on this process). Defined in notebook 03_case1_beyond."""
    order = []
    hooks = [p.register_post_accumulate_grad_hook(lambda p, n=name: order.append((n, p.numel() * p.element_size())))
             for name, p in model.named_parameters() if p.requires_grad]
    try:
        model(batch).float().sum().backward()
    finally:
        for h in hooks:
            h.remove()
    model.zero_grad(set_to_none=True)
    return order


def assign(order: list[tuple[str, int]], cap_mb: float) -> list[list[tuple[str, int]]]:
    """The buckets DDP's rebuild makes from `order` with cap `cap_mb` MiB. DDP rebuilds its buckets
    after the first iteration in the order the gradients became ready, filling each up to the cap (a
    bucket closes once it holds at least the cap; with the cap given explicitly, as case 1's options
    always do, the first bucket has the same cap). Defined in notebook 03_case1_beyond."""
    buckets, current, size = [], [], 0
    for name, nbytes in order:
        current.append((name, nbytes))
        size += nbytes
        if size >= cap_mb * MIB:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


def last_bucket_share(order: list[tuple[str, int]], cap_mb: float) -> float:
    """Share of the gradient bytes in the bucket holding the last-ready gradient. A bucket's
    all-reduce starts when its last gradient is ready, so this bucket always starts after backward ends.
    Defined in notebook 03_case1_beyond."""
    total = sum(b for _, b in order)
    return sum(b for _, b in assign(order, cap_mb)[-1]) / total


def recorded_ready(rec: dict, step: int = -1) -> list[dict]:
    """Per bucket of one recorded step (a `data/runs/case1-h200-*.json` record, rank 0): its bytes and
    when DDP handed it to the all-reduce, as a fraction of that step's backward pass (0 its start, 1 its
    end). Read from the timer's bucket intervals: a fact of the run, not of the cap arithmetic above.
    Defined in notebook 03_case1_beyond."""
    s = Rank(rec["results"]["ranks"][0]).steps()[step]
    b0, b1 = s.phases["backward"]
    return [{"bytes": b.bytes, "ready": (b.start - b0) / (b1 - b0)} for b in s.buckets]
