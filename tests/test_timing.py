"""The per-step timer: counts and bytes exactly, times cross-checked."""

import statistics

import _timing_workers as w
import pytest
import torch

from ddp_lessons import hooks, launch
from ddp_lessons.intro import workers as toy
from ddp_lessons.timing import StepTimer, _comm_numbers, median_step


def _median(rank_times, key, skip=2):
    return statistics.median(s[key] for s in rank_times["steps"][skip:])


def test_counts_and_bytes_per_step_are_exact():
    # 1 MB buckets on a ~3.2 MB model: DDP makes several buckets after step 0.
    out = launch(toy.train_mlp, (8, 512, 4, 16, 1.0), world_size=2)
    for rank in out:
        steps = rank["steps"]
        assert len(steps) == 8
        assert steps[0]["allreduce_calls"] == 1  # the first step has one big bucket
        assert all(s["allreduce_calls"] > 1 for s in steps[2:])
        # Every gradient byte is all-reduced once per step.
        assert {s["allreduce_bytes"] for s in steps} == {rank["grad_bytes"]}
        assert all(0 <= s["exposed"] <= s["backward"] + 1e-6 for s in steps)


def test_a_known_delay_moves_the_measured_allreduce_by_that_much():
    delay = 0.05
    base = launch(toy.train_mlp, (8, 256, 2, 16, 25.0), world_size=2)
    slow = launch(toy.train_mlp, (8, 256, 2, 16, 25.0, True, delay), world_size=2)
    for b, s in zip(base, slow):
        calls = _median(s, "allreduce_calls")
        moved = _median(s, "allreduce") - _median(b, "allreduce")
        assert moved == pytest.approx(delay * calls, rel=0.3)
        # The backward pass cannot hide a delay added after the last bucket.
        assert _median(s, "exposed") - _median(b, "exposed") == pytest.approx(delay, rel=0.3)


def test_agrees_with_ddps_own_logging():
    # A 20 ms delay makes communication dominate, so noise stays small next to it.
    out = launch(toy.train_mlp, (10, 256, 2, 16, 25.0, True, 0.02, None, True), world_size=2)
    for rank in out:
        ours = [s["exposed"] for s in rank["steps"][2:9]]
        ddp = [d["exposed"] for d in rank["ddp_logging"][2:9]]  # entry i describes step i
        assert statistics.median(ours) == pytest.approx(statistics.median(ddp), rel=0.25, abs=0.003)


@pytest.mark.parametrize("timed", [False, True])
def test_compression_sends_half_the_bytes_whether_timed_or_not(timed):
    out = launch(w.count_sent_bytes, (timed, torch.float16), world_size=2)
    for rank in out:
        # Counted at dist.all_reduce, not by the timer: every step, every gradient, in fp16.
        assert rank["sent_dtypes"] == ["torch.float16"]
        assert rank["sent_bytes"] == rank["n_steps"] * rank["grad_bytes"] // 2
        assert rank["comm_hook"] == ("timed_comm_hook" if timed else "allreduce_hook_in_fp16")
        if timed:  # and the timer reports what was sent
            assert {s["allreduce_bytes"] for s in rank["steps"]} == {rank["grad_bytes"] // 2}
            assert all(b["grad_bytes"] == 2 * b["bytes"] for s in rank["steps"] for b in s["buckets"])
        else:
            assert rank["steps"] == []


def test_disabled_timer_records_nothing_and_registers_no_hook():
    out = launch(toy.train_mlp, (4, 64, 1, 8, 25.0, False), world_size=2)
    assert all(r["steps"] == [] and not r["comm_hook"] for r in out)


@pytest.mark.parametrize("timed", [False, True])
def test_the_users_own_hook_is_wrapped_and_its_result_used(timed):
    for rank in launch(w.own_hook, (timed,), world_size=2):
        assert rank["calls"] > 3 and not rank["changed"]  # a few buckets per step; zeros applied
        if timed:
            assert rank["timed_buckets"] == rank["calls"] and rank["comm_hook"] == "timed_comm_hook"
        else:
            assert rank["comm_hook"].endswith("_zeroing_hook")


def test_a_model_that_already_has_a_hook_says_to_pass_it_to_the_timer():
    msg = launch(w.hook_already_registered, world_size=1)[0]
    assert "hook=" in msg and "\n" not in msg


def test_compression_hook_names():
    assert hooks.compression_hook(None) is None and hooks.compression_hook("none") is None
    assert hooks.compression_hook("bf16").__name__ == "allreduce_hook_in_bf16"
    assert hooks.compression_hook(torch.float16).__name__ == "allreduce_hook_in_fp16"
    assert hooks.delayed(None, 0.0) is None
    with pytest.raises(ValueError, match="fp16"):
        hooks.compression_hook("int8")


def test_single_process_timer_without_ddp():
    model = torch.nn.Linear(4, 1)
    timer = StepTimer(None)
    for _ in range(3):
        with timer.phase("forward"):
            loss = model(torch.randn(2, 4)).sum()
        with timer.phase("backward"):
            loss.backward()
        timer.step_done()
    steps = timer.result()["steps"]
    assert len(steps) == 3 and all(s["allreduce_calls"] == 0 for s in steps)
    assert all(s["step_time"] >= s["forward"] + s["backward"] for s in steps)
    assert set(median_step(timer.result(), skip=0)) >= {"forward", "backward", "step_time"}


def test_busy_time_is_the_union_of_bucket_intervals():
    buckets = [{"start": 0.0, "end": 2.0, "bytes": 1}, {"start": 1.0, "end": 3.0, "bytes": 1},
               {"start": 5.0, "end": 6.0, "bytes": 2}]
    got = _comm_numbers(buckets, (0.0, 6.5))
    assert got["allreduce"] == 4.0 and got["allreduce_calls"] == 3 and got["allreduce_bytes"] == 4
    assert got["exposed"] == 1.0  # last bucket ready at 5.0, done at 6.0
    assert got["backward_compute"] == 5.5
