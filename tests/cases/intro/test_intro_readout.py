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
    assert costs["light"]["median"] == pytest.approx(0.053, abs=0.001)   # "about 5% median on a 3 ms step"
    assert costs["light_marks"]["median"] > costs["light"]["median"]      # a subset costing more: noise
    assert readout.costlier(costs, "light", than="profiler") == (21, 21)
    assert readout.per_call(records.load("timer-cost-h200x1"))["step_us"] == pytest.approx(3192, abs=1)


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
