"""Notebook 06's verdicts: each comes out every way it can, on numbers made for it."""

import dataclasses

import pytest

from ddp_lessons.cases.case2 import verdicts as c
from ddp_lessons.cases.case2 import mlp
from ddp_lessons.cases.case2.breakeven import (Costs, StepModel, core_share, describe_payback, k_from_sweep,
                                              payback, powersgd_bytes, recorded_medians, sensitivity, speedup)
from ddp_lessons.tool.verdict import FAILS, HOLDS, UNRESOLVED


def test_below_ceiling_every_outcome():
    assert c.below_ceiling([1.1, 1.0, 0.95, 1.05, 1.0], 1.6).status == HOLDS
    assert c.below_ceiling([1.8, 1.9, 1.7, 1.85, 1.75], 1.6).status == FAILS
    assert c.below_ceiling([1.1, 1.7, 1.2, 1.0, 1.15], 1.6).status == UNRESOLVED
    assert c.below_ceiling([1.1, 1.0, 0.95, 1.05], 1.6).status == UNRESOLVED   # four rounds: too few to know the spread


def test_faster_step_every_outcome_and_a_missing_lever():
    assert c.faster_step("a", [2] * 5, "b", [1] * 5, "x").status == HOLDS
    assert c.faster_step("a", [2] * 5, "b", [3] * 5, "x").status == FAILS
    assert c.faster_step("a", [2] * 5, "b", [1, 3, 1, 1, 1], "x").status == UNRESOLVED
    assert c.faster_step("a", [2] * 5, "b", [], "x").status == UNRESOLVED    # the lever did not run
    assert c.faster_step("a", [2, None, 2, 2, 2, 2], "b", [1, 1, None, 1, 1, 1], "x").status == UNRESOLVED  # 4 paired


def test_gpus_win_every_outcome():
    assert c.gpus_win([1.2, 2.0], 3, 256, "t").status == HOLDS
    assert c.gpus_win([0.2, 0.9], 3, 256, "t").status == FAILS
    assert c.gpus_win([0.2, 1.9], 3, 256, "t").status == UNRESOLVED           # the table's rows disagree
    with pytest.raises(ValueError, match="at least one"):
        c.gpus_win([], 3, 256, "t")


def test_06_verdicts_print_the_sentence_of_their_outcome():
    assert "3 GPUs beat one at width 256 under every link row" in str(c.gpus_win([1.2, 2.0], 3, 256, "eager"))
    assert "3 GPUs lose to one at width 256 under its link assumption" in str(c.gpus_win([0.5], 3, 256, "eager"))
    assert "depends on the link" in str(c.gpus_win([0.2, 1.9], 3, 256, "t"))
    faster = c.faster_step("a", [2] * 5, "b", [1] * 5, "X")
    assert "On X the b step was faster than the a step in every round" in str(faster)
    assert "was slower" in str(c.faster_step("a", [2] * 5, "b", [3] * 5, "X"))
    assert "reads as a ceiling" in str(c.below_ceiling([1.1, 1.0, 0.95, 1.05, 1.0], 1.6))
    assert "no ceiling" in str(c.below_ceiling([1.8, 1.9, 1.7, 1.85, 1.75], 1.6))


def test_payback_and_powersgd_arithmetic():
    p = payback(3.0, 0.2, 0.1, epochs=200)
    assert p["per_epoch"] == pytest.approx(0.1) and p["breakeven_epochs"] == pytest.approx(30)
    assert p["net"] == pytest.approx(17.0) and "pay it back after 30 epochs" in describe_payback(p, 3, 3.0)
    lose = payback(3.0, 0.1, 0.2)
    assert lose["breakeven_epochs"] == float("inf") and "save nothing per epoch" in describe_payback(lose, 3, 3.0)
    nbytes, calls = powersgd_bytes(mlp(256, 3))
    assert calls == 3 and nbytes == 4 * (3 * 256 + 1 + (256 + 10) + 2 * 512 + (1 + 256))


# -- the models the verdicts read -----------------------------------------------
def test_shared_compute_model_never_predicts_a_win_own_cores_can():
    base = Costs(c0=1e-3, k=1e-10, latency=1e-4, bandwidth=1e9)  # compute 54 ms, all-reduce 8 ms at 1024
    shared = dataclasses.replace(base, slowdown={2: 2.0})
    own = dataclasses.replace(base, slowdown={2: core_share(2, cores=2, threads=1)})
    for w in (64, 1024, 8192):
        assert speedup(shared, world_size=2, width=w) < 1.0
    assert speedup(own, world_size=2, width=1024) > 1.0


def test_core_share():
    assert core_share(2, cores=2, threads=1) == 1.0 and core_share(2, cores=16, threads=8) == 1.0
    assert core_share(3, cores=2, threads=1) == 1.5 and core_share(2, cores=2, threads=2) == 2.0


def test_step_model_launch_floor_and_link():
    m = StepModel(one=0.2e-3, ddp=2e-3, k=2e-13, latency=30e-6, busbw=100e9)
    assert m.step(256, 1) == 0.2e-3                       # on the launch floor
    assert m.step(256, 3) > 2e-3                          # DDP's floor plus the all-reduce
    assert m.speedup(256, 3) < 1.0
    assert m.breakeven(3, [256, 1024, 4096, 16384]) in (1024, 4096, 16384)
    hidden = dataclasses.replace(m, exposed=0.0)
    assert hidden.step(256, 3) == 2e-3
    slow = dataclasses.replace(m, busbw=1e9)
    assert slow.breakeven(3, [256, 1024, 4096, 16384]) is None  # compute and bytes both grow with params
    rows = sensitivity(m, 3, [256, 4096], [10e-6, 100e-6], [100e9, 1e9])
    assert len(rows) == 8 and {"latency", "busbw", "exposed", "breakeven", "speedup@256"} <= set(rows[0])


def test_k_and_recorded_medians():
    rows = [{"params": 10, "batch": 2, "compute": 1.0}, {"params": 100, "batch": 2, "compute": 4.0}]
    assert k_from_sweep(rows) == 4.0 / 200
    levers = {"rounds_done": 3, "levers": {"a": {"rounds": [{"round": 0, "median": 1.0}, {"round": 2, "median": 3.0}]}}}
    assert recorded_medians(levers, "a") == [1.0, None, 3.0] and recorded_medians(levers, "b") == [None] * 3
    pairs = {"rounds_done": 2, "runs": [{"name": "a", "ok": True, "round": 1, "summary": {"median": 2.0}},
                                         {"name": "a", "ok": False, "round": 0}]}
    assert recorded_medians(pairs, "a") == [None, 2.0]
