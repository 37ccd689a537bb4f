"""Case 1's verdicts on its bucket model (notebook 03): which gradient bytes wait for the
backward pass to end (`buckets`). Defined in notebook 03_case1_beyond.
"""

from __future__ import annotations

from ....tool import verdict as V
from ..buckets import assign, last_bucket_share


def late_tensor_exposed(order: list[tuple[str, int]], caps_mb=(1, 4, 25), limit: float = 0.5,
                        model: str = "this model") -> V.Verdict:
    """03: the last-ready gradient alone holds more than `limit` of the bytes of `model` (named in the
    sentence: the tiny CPU stand-in, whose 50,265-word embedding at width 64 is ~85% of its bytes),
    so for every bucket size at least that share is all-reduced after the backward pass.
    Defined in notebook 03_case1_beyond."""
    total = sum(b for _, b in order)
    name, last = order[-1]
    shares = {f"{c:g} MB": f"{last_bucket_share(order, c):.0%}" for c in caps_mb}
    v = V.exact(f"the last gradient to become ready ({name}) holds most of the bytes, so no bucket size "
                f"overlaps them with the backward pass", last / total, side=">", limit=limit,
                what="its share of the gradient bytes",
                numbers={"bytes": f"{last:,} of {total:,}",
                         "share in the last bucket, by bucket size":
                             ", ".join(f"{k} {v}" for k, v in shares.items())})
    return V.worded(v, holds=f"In {model} the last gradient to become ready ({name}) holds most of the gradient "
                             "bytes, so no bucket size lets them overlap the backward pass.",
                    fails=f"In {model} the last gradient to become ready ({name}) holds a minority of the "
                          "bytes: buckets can start the rest during the backward pass.",
                    figure=f"{last / total:.0%} of the gradient bytes")


def calls_match(order: list[tuple[str, int]], measured: dict) -> V.Verdict:
    """The bucket counts `assign` predicts equal the all-reduce calls per step
    DDP made (`measured`: cap in MB -> calls). Defined in notebook 03_case1_beyond."""
    predicted = {c: len(assign(order, c)) for c in measured}
    return V.exact("the ready order explains DDP's all-reduce calls per step", predicted, expected=dict(measured),
                   what="predicted calls by bucket size (MB)")
