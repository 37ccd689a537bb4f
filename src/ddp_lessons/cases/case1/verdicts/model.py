"""Case 1's verdicts on its two models (notebook 03): does the modelled
all-reduce explain the post's 133 s against 105 s (`gap`), and which gradient
bytes wait for the backward pass to end (`buckets`). Defined in notebook
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


def comm_explains_gap(rows: list[dict], post: dict = POST) -> V.Verdict:
    """03: in the model the all-reduce alone reaches the post's two-GPU epoch (nothing overlapped) in
    some rows but not in all: the conclusion turns on the batch and the link, which the post does not
    give. Fails when no row reaches it, or every row does. Defined in notebook 03_case1_beyond."""
    reach = [f"batch {r['batch']} at {r['busbw'] / 1e9:g} GB/s" for r in rows if r["epoch2_none"] >= post["two_gpu_s"]]
    k, n, t = len(reach), len(rows), f"{post['two_gpu_s']:g} s"
    v = V.exact(f"the all-reduce alone reaches {t} in some rows of the model, not in all", 0 < k < n,
                expected=True, what="some rows but not all reach it",
                numbers={"rows that reach it": "; ".join(reach) or "none", "of": str(n)})
    return V.worded(v, holds=f"In the model the all-reduce alone brings the two-GPU epoch to the post's {t} only "
                             f"in some rows ({'; '.join(reach)}, nothing overlapped): whether it explains the post "
                             "turns on the batch and the link, which the post does not give.",
                    fails=(f"In no row of the model does the all-reduce alone bring the two-GPU epoch to {t}: "
                           "communication alone does not explain the post." if k == 0 else
                           f"In every row of the model the all-reduce alone brings the two-GPU epoch to {t}: "
                           "communication explains the post whatever the batch and the link."),
                    figure=f"{k} of {n} rows reach {t}")


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
