"""Self-checks of the case 1 notebooks (01, 02, 03); answers computed here, not shown there."""

from __future__ import annotations

import math

from ...tool import allreduce
from ...tool.ddp import gradient_bytes
from ...course.exercises import check, compare_choice, compare_number, exercise  # noqa: F401 - check: the notebooks'
from .synthetic import TINY_DATA


def _tiny_train() -> int:
    n_qa = 400 if TINY_DATA["n_qa"] == 400 else TINY_DATA["n_qa"]
    return n_qa - round(n_qa * 0.13)


def _m3ae_bytes(heads: bool = True) -> int:
    import torch
    from .model import M3AEConfig, M3AETransformerSS
    with torch.device("meta"):
        return gradient_bytes(M3AETransformerSS(M3AEConfig.m3ae(), with_pretrain_heads=heads))


@exercise("01.1")
def _samples_per_rank(answer):
    return compare_number(answer, math.ceil(_tiny_train() / 2), rel_right=0.0, rel_close=0.05,
                          what="samples per rank")


@exercise("01.2")
def _bytes_with_heads(answer):
    return compare_number(answer, _m3ae_bytes(True), rel_right=0.01, what="bytes per step")


@exercise("02.1")
def _steps_halved(answer):
    # 2 ranks, batch 8 halved to 4: each rank takes ceil(174 / 4) steps per epoch
    return compare_number(answer, math.ceil(math.ceil(_tiny_train() / 2) / 4), rel_right=0.0,
                          rel_close=0.1, what="steps per epoch")


@exercise("02.2")
def _which_fix_fails(answer):
    return compare_choice(answer, "find_unused_parameters=False",
                          {"num_workers=8": "that one runs; it only adds loader processes",
                           "loss.item()": "that one runs; on a GPU it adds a sync per step"})


@exercise("03.1")
def _bytes_saved(answer):
    return compare_number(answer, _m3ae_bytes(True) - _m3ae_bytes(False), rel_right=0.01,
                          what="bytes saved per step by dropping the heads")


@exercise("03.2")
def _allreduce_ms(answer):
    # the M3AE-size model without heads, 2 ranks, ring all-reduce at 10 GB/s busbw
    return compare_number(answer, allreduce.estimate(_m3ae_bytes(False), 10e9) * 1e3, rel_right=0.03,
                          what="modelled all-reduce time (ms)")
