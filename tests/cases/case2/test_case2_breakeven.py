"""Notebook 06's models: the break-even predictor, the step model and their arithmetic."""

import dataclasses

from ddp_lessons.cases.case2 import mlp
from ddp_lessons.cases.case2.breakeven import (Costs, StepModel, core_share, k_from_sweep, powersgd_bytes,
                                              powersgd_compressed, sensitivity, speedup)
from ddp_lessons.cases.case2.readout import recorded_medians


def test_powersgd_arithmetic():
    nbytes, calls = powersgd_bytes(mlp(256, 3))
    # biases whole; 256x10 and 256x256 as P and Q; the 1x256 output layer whole: (1 + 256) x 2 > 256 elements
    assert calls == 3 and nbytes == 4 * (3 * 256 + 1 + (256 + 10) + 2 * 512 + 256)
    assert powersgd_bytes(mlp(256, 3), min_compression_rate=0.5)[0] == 4 * (3 * 256 + 1 + (256 + 10) + 2 * 512 + 257)


def test_powersgd_waits_for_its_start_iteration():
    assert powersgd_compressed(600) == 0                   # torch's default start_powerSGD_iter=1000
    assert powersgd_compressed(600, start_iter=2) == 598 and powersgd_compressed(1500) == 500


# -- the models 06 prints -----------------------------------------------
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
    assert m.epoch_steps(256, 1) == 20 * m.step(256, 1) and m.epoch_steps(256, 3) == 7 * m.step(256, 3)
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
