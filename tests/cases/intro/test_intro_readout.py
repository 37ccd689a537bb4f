"""Notebook 00's readings (ddp_lessons.cases.intro.readout) on made-up runs and on the course's records,
and its options: what replaced the verdicts that could not fail."""

import pytest

from ddp_lessons import Run
from ddp_lessons.tool import records
from ddp_lessons.cases.intro import Options, Sweep, readout


def _run(exposed, ddp_exposed, step=0.004):
    """A 2-rank run as `train.train` returns it with DDP's own timings: rank 0's exposed per step, DDP's."""
    def rank(r):
        steps = [{"step": i, "step_time": step, "t_start": i * step, "forward": 0.001, "backward": 0.002,
                  "backward_compute": 0.002 - e, "exposed": e, "allreduce": e, "allreduce_calls": 1}
                 for i, e in enumerate(exposed)]
        return {"rank": r, "world_size": 2, "steps": steps, "comm_source": "hook",
                "ddp_logging": [{"exposed": e} for e in ddp_exposed]}
    return Run([rank(0), rank(1)])


def test_clocks_pair_each_step_with_ddps_figure_and_count_the_agreements():
    # steps 2..5 timed; DDP's numbers for steps 2..4 (the last step's come at a next forward)
    c = readout.clocks(_run([0.01, 0.01, 0.0012, 0.0013, 0.003, 0.002], [0.01, 0.01, 0.0002, 0.0012, 0.0029]))
    assert c["steps"] == 3 and c["agree"] == 2               # 1.2 ms against 0.2 ms is the one disagreement
    assert c["difference"] == pytest.approx(0.0001)


def test_clocks_say_how_far_apart_the_disagreeing_steps_are_and_the_hooks_own_time():
    c = readout.clocks(_run([0, 0, 0.0012, 0.0013, 0.003, 0.002], [0, 0, 0.0002, 0.0012, 0.0029]))
    assert c["apart"] == pytest.approx(0.001) and c["hook"] == 0.0 and c["head"] is None   # no buckets here
    assert readout.clocks(_run([0, 0, 0.001], [0, 0, 0.001]))["apart"] == 0.0


def _bucketed(hook=0.0002, head=0.00003, tail=0.00008):
    """One step as mode "full" gives it with DDP's own timings beside it: one bucket ready at 2 ms,
    handed over `hook` later, done at 3 ms; DDP's compute end `head` after the hand-over, its comm end
    `tail` after the bucket was done (its comm clock starts at the bucket's ready)."""
    start, sent, end = 0.002, 0.002 + hook, 0.003
    step = {"step": 2, "step_time": 0.004, "t_start": 0.0, "exposed": end - sent, "hook_time": hook,
            "buckets": [{"index": 0, "start": start, "sent": sent, "end": end, "bytes": 4, "grad_bytes": 4}]}
    ddp = {"backward_comm_time": end + tail - start, "backward_compute_comm_overlap_time": sent + head - start}
    ddp["exposed"] = ddp["backward_comm_time"] - ddp["backward_compute_comm_overlap_time"]
    rank = {"rank": 0, "world_size": 2, "comm_source": "hook", "steps": [dict(step, step=i) for i in range(3)],
            "ddp_logging": [ddp] * 3}
    return Run([rank, dict(rank, rank=1)])


def test_clocks_split_timer_minus_ddp_into_where_ddp_starts_and_ends_later():
    c = readout.clocks(_bucketed())
    assert c["head"] == pytest.approx(0.00003) and c["tail"] == pytest.approx(0.00008)
    assert c["difference"] == pytest.approx(c["head"] - c["tail"])        # exactly, step by step
    assert c["hook"] == pytest.approx(0.0002) and c["agree"] == 1          # the hook is not in either figure


def test_clocks_tolerance_is_relative_plus_the_clock_resolution():
    c = readout.clocks(_run([0, 0, 0.00110], [0, 0, 0.00084]))   # 0.26 ms apart: 25% of 0.84 + 50 us allows 0.26
    assert c["agree"] == 1
    c = readout.clocks(_run([0, 0, 0.0010], [0, 0, 0.0002]))     # the review's 1.0 against 0.2 ms
    assert c["agree"] == 0


def test_moved_is_the_median_step_difference_per_number():
    base, slow = _run([0.001] * 6, []), _run([0.051] * 6, [], step=0.054)
    m = readout.moved(base, slow)
    assert m["step_time"] == pytest.approx(0.050) and m["exposed"] == pytest.approx(0.050)
    assert m["forward"] == pytest.approx(0.0)


def test_best_of_recomputes_the_bandwidths_from_the_best_time():
    rows = [{"bytes": 1000, "time": 2e-3, "best": 1e-3, "p90": 3e-3, "algbw": 5e5, "busbw": 5e5}]
    assert readout.best_of(rows)[0]["algbw"] == pytest.approx(1e6) and readout.best_of(rows)[0]["busbw"] == 1e6


def test_the_timer_cost_record_reads_as_the_notebook_prints_it():
    costs = readout.cost_rounds(records.load("timer-cost-h200x1"))
    assert len(costs["light"]["per_round"]) == 21
    assert costs["light"]["median"] == pytest.approx(0.053, abs=0.001)   # "median +5%" of a 3 ms step
    assert costs["light_marks"]["median"] > costs["light"]["median"]      # a subset costing more: noise
    assert readout.costlier(costs, "light", than="profiler") == (21, 21)
    assert readout.per_call(records.load("timer-cost-h200x1"))["step_us"] == pytest.approx(3192, abs=1)


def test_a_cost_is_unresolved_where_its_rounds_reach_both_sides_of_zero():
    assert readout.cost_spread({"median": 0.053, "lo": -0.064, "hi": 0.412}) == "median +5%, unresolved (-6% to +41%)"
    assert readout.cost_spread({"median": 0.0486, "lo": 0.0234, "hi": 0.0838}, digits=1) == \
        "median +4.9%, resolved (+2.3% to +8.4%)"
    assert "resolved (-9% to -1%)" in readout.cost_spread({"median": -0.05, "lo": -0.09, "hi": -0.01})


def test_the_doctor_cost_record_reads_per_step_size_and_arm():
    rows = {(r["config"], r["arm"]): r for r in readout.doctor_cost(records.load("doctor-cost-h100x1"))}
    quick = rows[("256x8x256", "doctor-noprofile")]
    assert quick["step_ms"] == pytest.approx(3.12, abs=0.01) and quick["rounds"] == 7
    assert (quick["median"], quick["lo"], quick["hi"]) == pytest.approx((0.049, 0.023, 0.084), abs=0.001)
    assert quick["self"] == pytest.approx(0.027, abs=0.001) and quick["lo"] < quick["self"] < quick["median"]
    wide = rows[("2048x4x1536", "doctor")]
    assert wide["step_ms"] == pytest.approx(8.82, abs=0.01) and wide["lo"] < 0 < wide["hi"]


def test_small_sizes_give_the_best_times_up_to_64_kib():
    best = [{"bytes": 4096, "time": 2e-4}, {"bytes": 65536, "time": 1.4e-4}, {"bytes": 1 << 20, "time": 1e-3}]
    assert readout.small_sizes(best) == (1.4e-4, 2e-4)


def test_full_mode_cost_reads_the_record_on_a_machine_without_nccl():
    where = type("Where", (), {"backend": "gloo", "world_size": 2})()
    full = readout.full_mode_cost(where)
    assert len(full["rounds"]) == 5 and full["rounds"][0] > 0 and full["median"] == pytest.approx(0.46, abs=0.02)


def test_options_refuse_nonsense_and_the_presets_are_valid():
    with pytest.raises(ValueError, match="width"):
        Options(width=0)
    with pytest.raises(ValueError, match="mode"):
        Options(mode="fast")
    assert all(Options.preset(p) for p in Options.PRESETS)
    assert Options.preset("delayed").diff(Options.preset("check")) == {"comm_delay_s": (0.05, 0.0),
                                                                        "ddp_logging": (False, True)}


def test_the_sweep_compares_4_and_64_kib_and_the_largest_against_a_quarter_of_it():
    assert Sweep().compared("cpu") == [4096, 65536, 4 << 20, 16 << 20]
    assert Sweep().compared("cuda") == [4096, 65536, 64 << 20, 256 << 20]
    assert Sweep().sizes("cpu")[0] == 4096 and Sweep().sizes("cpu")[-1] == 16 << 20
