"""Case 1's verdicts on its two models (notebook 03): does the modelled
all-reduce explain the post's 133 s against 105 s (`gap`), and does the
gradients' ready order explain DDP's buckets (`buckets`). Defined in notebook
03_case1_beyond.
"""

from __future__ import annotations

from ....tool import verdict as V
from ..buckets import assign, last_bucket_share
from ..gap import POST


def comm_can_explain(rows: list[dict], post: dict = POST) -> V.Verdict:
    """Holds when in some row of the model communication alone reaches the
    post's two-GPU epoch without overlap (exact arithmetic of the model). Defined in notebook 03_case1_beyond."""
    reach = [f"batch {r['batch']} at {r['busbw'] / 1e9:g} GB/s" for r in rows if r["epoch2_none"] >= post["two_gpu_s"]]
    return V.exact(f"in some row of the model the all-reduce alone makes the two-GPU epoch reach "
                   f"{post['two_gpu_s']:g} s", len(reach), side=">", limit=0, what="rows that reach it",
                   numbers={"rows": "; ".join(reach) or "none", "of": str(len(rows))})


def comm_explains_everywhere(rows: list[dict], post: dict = POST) -> V.Verdict:
    """Holds when every row reaches the post's two-GPU epoch: the conclusion would not depend on the link.
    Defined in notebook 03_case1_beyond."""
    n = sum(r["epoch2_none"] >= post["two_gpu_s"] for r in rows)
    return V.exact("the all-reduce alone explains the two-GPU epoch whatever the batch and the link", n,
                   expected=len(rows), what="rows that reach it", numbers={"of": str(len(rows))})


def late_tensor_exposed(order: list[tuple[str, int]], caps_mb=(1, 4, 25), limit: float = 0.5) -> V.Verdict:
    """03: the last-ready gradient alone holds more than `limit` of the bytes,
    so for every bucket size at least that share is all-reduced after the
    backward pass: no bucket size can hide it. Defined in notebook 03_case1_beyond."""
    total = sum(b for _, b in order)
    name, last = order[-1]
    shares = {f"{c:g} MB": f"{last_bucket_share(order, c):.0%}" for c in caps_mb}
    return V.exact(f"the last gradient to become ready ({name}) holds most of the bytes, so no bucket size "
                   f"overlaps them with the backward pass", last / total, side=">", limit=limit,
                   what="its share of the gradient bytes",
                   numbers={"bytes": f"{last:,} of {total:,}",
                            "share in the last bucket, by bucket size":
                                ", ".join(f"{k} {v}" for k, v in shares.items())})


def calls_match(order: list[tuple[str, int]], measured: dict) -> V.Verdict:
    """The bucket counts `assign` predicts equal the all-reduce calls per step
    DDP made (`measured`: cap in MB -> calls). Defined in notebook 03_case1_beyond."""
    predicted = {c: len(assign(order, c)) for c in measured}
    return V.exact("the ready order explains DDP's all-reduce calls per step", predicted, expected=dict(measured),
                   what="predicted calls by bucket size (MB)")
