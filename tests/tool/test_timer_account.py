"""The timer accounts for all of a rank's time: steps start at their own first
mark, work outside the steps is kept under its name, the parts add up."""

import time

import pytest

from ddp_lessons.tool import plots
from ddp_lessons.tool.timing import StepTimer
from ddp_lessons.tool.timing.account import account


def _epochs(timer, epochs=2, steps=3, work=0.01, eval_s=0.05):
    for _ in range(epochs):
        for _ in timer.data(range(steps)):
            with timer.phase("forward"):
                time.sleep(work)
            timer.step_done()
        with timer.outside("eval"):
            time.sleep(eval_s)


def test_work_between_epochs_is_outside_the_steps_and_kept():
    timer = StepTimer(None)
    _epochs(timer)
    res = timer.result()
    assert len(res["steps"]) == 6
    # No step holds an evaluation, and both epochs' evaluations are kept. A sleep never
    # ends early, and on a loaded machine it can end late, so the bounds are one-sided
    # where load can only add: a step that held an evaluation would be at least 0.06 s.
    evals = [o["end"] - o["start"] for o in res["outside"]]
    assert [o["name"] for o in res["outside"]] == ["eval", "eval"]
    assert all(0.05 <= e for e in evals)
    assert max(s["step_time"] for s in res["steps"]) < min(evals) + 0.01
    assert res["account"]["outside"]["eval"] == pytest.approx(sum(evals))


def test_the_parts_add_up_to_the_wall():
    timer = StepTimer(None)
    time.sleep(0.03)                        # before the first step
    _epochs(timer)
    time.sleep(0.02)                        # after the last one
    a = timer.result()["account"]
    assert a["steps"] + sum(a["outside"].values()) + a["unattributed"] == pytest.approx(a["wall"])
    split = a["before_first_step"] + a["between_steps"] + a["after_last_step"]
    assert split == pytest.approx(a["unattributed"], abs=1e-6)
    assert a["before_first_step"] >= 0.03 and a["after_last_step"] >= 0.02


def test_a_phase_between_steps_is_moved_to_outside_work():
    timer = StepTimer(None)
    for _ in range(2):
        for _ in timer.data(range(2)):
            with timer.phase("forward"):
                pass
            timer.step_done()
        with timer.phase("eval"):          # not in a step: the next batch wait moves it out
            time.sleep(0.02)
    res = timer.result()
    assert len(res["steps"]) == 4 and res["unfinished_steps"] == 2
    assert [o["name"] for o in res["outside"]] == ["eval", "eval"]
    assert all("eval" not in s for s in res["steps"])


def test_outside_inside_a_step_is_refused():
    timer = StepTimer(None)
    for _ in timer.data(range(1)):
        with pytest.raises(RuntimeError, match="step_done"):
            timer.outside("log")


def test_phases_and_waits_inside_outside_work_open_no_step():
    timer = StepTimer(None)
    with timer.outside("eval"):
        for _ in timer.data(range(3)):
            with timer.phase("forward"):
                pass
    res = timer.result()
    assert res["steps"] == [] and [o["name"] for o in res["outside"]] == ["eval"]


def test_a_step_opened_by_phases_set_directly_starts_its_data_wait_before_them():
    # What case 2's Lightning callback does: phases set on the step, the wait given in seconds.
    timer = StepTimer(None)
    timer.batch_waited(0.02)
    a = timer.mark()
    time.sleep(0.01)
    timer.phase_span("forward", a, timer.mark())
    timer.step_done()
    s = timer.result()["steps"][0]
    fwd = s["phases"]["forward"]
    assert fwd[0] == pytest.approx(0.02) and s["data"] == 0.02  # the wait fills the step's start
    assert fwd[1] - fwd[0] >= 0.01 and s["step_time"] >= fwd[1]


def test_the_result_carries_the_run():
    res = StepTimer(None, batch_size=16).result()
    assert {"rank": 0, "world_size": 1, "batch_size": 16}.items() <= res.items()
    assert res["threads"] >= 1 and "start_method" in res and "backend" in res and res["device"] == "cpu"


def test_run_start_says_where_the_runs_start_up_began():
    t0 = time.perf_counter()
    time.sleep(0.05)
    res = StepTimer(None, run_start=t0).result()
    assert 0.05 <= res["account"]["startup"] < 5
    assert StepTimer(None, run_start=None).result()["account"]["startup"] is None
    # the default: from the process's start (psutil), longer than this test's own sleep
    assert StepTimer(None).result()["account"]["startup"] > 0.05
    for bad in ("soon", True, [1.0]):
        with pytest.raises(ValueError, match="run_start="):
            StepTimer(None, run_start=bad)


@pytest.mark.slow
def test_the_timer_follows_the_ddp_models_process_group():
    import _timing_workers as w

    from ddp_lessons import launch
    out = launch(w.timer_in_a_subgroup, world_size=3, timeout=120)
    assert "not in the timer's process group" in out[2]["refused"]
    for rank in (0, 1):
        r = out[rank]
        assert (r["rank"], r["world_size"], r["group_ranks"]) == (rank, 2, [0, 1])
        assert r["clock"]["method"] == "shared host clock" and len(r["steps"]) == 3
        assert all(s["allreduce_calls"] >= 1 for s in r["steps"])
    assert out[0]["first_param"] == out[1]["first_param"]   # the hook averaged over the two


def test_account_splits_uncovered_time_by_where_it_lies():
    steps = [{"t_start": 1.0, "step_time": 1.0}, {"t_start": 3.0, "step_time": 1.0}]
    a = account(6.0, steps, [{"name": "eval", "start": 2.0, "end": 2.5}])
    assert (a["before_first_step"], a["between_steps"], a["after_last_step"]) == (1.0, 0.5, 2.0)
    assert a["unattributed"] == 3.5 and a["outside"] == {"eval": 0.5}


def test_step_breakdown_draws_step_time_custom_phases_and_the_remainder():
    timer = StepTimer(None)
    for _ in range(3):
        with timer.phase("forward"):
            time.sleep(0.002)
        with timer.phase("loss_item"):
            time.sleep(0.002)
        time.sleep(0.002)                   # in no phase: the remainder
        timer.step_done()
    fig = plots.step_breakdown([timer.result()])
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert {"step time", "loss_item", "no phase (remainder)"} <= set(labels)
