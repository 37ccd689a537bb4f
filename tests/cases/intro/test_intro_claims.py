"""Notebook 00's claims (intro.claims): each comes out every way it can."""

import pytest

from ddp_lessons.tool import verdict as V
from ddp_lessons.cases.intro import verdicts as C


def _best(small_us, big_us, half_us, full_us):
    # 4 and 64 KiB; then 2, 4, 8 and 16 MiB, each of the last three doublings costing full/half
    per = full_us / half_us
    large = {2 << 20: half_us / per / per, 4 << 20: half_us / per, 8 << 20: half_us, 16 << 20: full_us}
    return {4096: small_us * 1e-6, 65536: big_us * 1e-6, **{k: v * 1e-6 for k, v in large.items()}}


def test_latency_and_bandwidth_bound_both_ways():
    b = _best(100, 150, 2000, 3900)
    assert C.latency_bound(b).holds and C.bandwidth_bound(b).holds
    b = _best(100, 1000, 2000, 2100)  # 16x the bytes cost 10x: bandwidth; doubling costs 1.05x: latency
    assert C.latency_bound(b).fails and C.bandwidth_bound(b).fails


def test_one_disturbed_middle_size_does_not_decide_bandwidth_bound():
    b = _best(100, 150, 2000, 4000)
    b[8 << 20] *= 1.8   # every iteration of 8 MiB disturbed: 16/8 only 1.1x, 16/4 still 4x
    assert b[16 << 20] / b[8 << 20] < 1.5 and C.bandwidth_bound(b).holds
    with pytest.raises(ValueError, match="1/4 of the largest"):
        C.bandwidth_bound({1 << 20: 1e-3, 3 << 20: 3e-3})


def _steps(allreduce_ms, step_ms, n=10, jitter_ms=0.5):
    return [{"allreduce": (allreduce_ms + (i % 3 - 1) * jitter_ms) / 1e3,
             "step_time": (step_ms + (i % 3 - 1) * jitter_ms) / 1e3} for i in range(n)]


def test_delay_seen_holds_fails_and_is_unresolved():
    base = _steps(2, 10)
    assert C.delay_seen(base, _steps(22, 30), 0.02, 1).holds
    # The hook saw the delay but the step did not lose it: the delay was put somewhere the step never waits.
    assert C.delay_seen(base, _steps(22, 10), 0.02, 1).fails
    # Two calls per step: 40 ms expected, 20 ms moved.
    assert C.delay_seen(base, _steps(22, 30), 0.02, 2).fails
    # Steps so jittery that the interval reaches across a bound.
    noisy = _steps(2, 10, jitter_ms=12)
    assert C.delay_seen(noisy, _steps(22, 30, jitter_ms=12), 0.02, 1).status == V.UNRESOLVED


def test_agrees_with_ddp_three_ways():
    assert C.agrees_with_ddp([0.010] * 5, [0.011] * 5).holds
    assert C.agrees_with_ddp([0.030] * 5, [0.010] * 5).fails
    assert C.agrees_with_ddp([0.016] * 5, [0.010] * 5).status == V.UNRESOLVED  # 6 ms off, 5.5 allowed


def test_overhead_paired():
    t = {"off": [1.0, 1.0, 1.0, 1.0, 1.0], "full": [1.005, 1.008, 1.001, 1.002, 1.009]}
    assert C.overhead_paired(t, "full", budget=0.02).holds
    t["full"] = [1.3, 1.4, 1.5, 1.3, 1.2]
    assert C.overhead_paired(t, "full", budget=0.02).fails
    t["full"] = [1.0, 1.05, 1.0, 1.0, 1.0]
    assert C.overhead_paired(t, "full", budget=0.02).status == V.UNRESOLVED


def test_timer_budget_from_validation_rows():
    row = {"mode": "light", "run": "main", "ms_per_step": 2.0, "overhead_pct": 2.0, "spread_pct": [1.0, 3.5],
           "rounds": 5}
    assert C.timer_budget(row).holds
    assert C.timer_budget(dict(row, spread_pct=[11.0, 32.0])).fails
    assert C.timer_budget(dict(row, spread_pct=[2.0, 8.0])).status == V.UNRESOLVED
    assert C.timer_budget(dict(row, rounds=2)).status == V.UNRESOLVED
