"""The what-if replay's arithmetic on hand-made buckets, each case both ways, and
the tool's refusals. The replay of a real record is checked for its structure;
how far its predictions are from measured runs is benchmarks/whatif_check.py's."""

import subprocess
import sys

import pytest

from ddp_lessons import whatif
from ddp_lessons.tool.predict import LINKS, Link, from_fit, replay_step, table_text, whatif_table

# 1 GB/s bus bandwidth, no latency, 2 ranks: a bucket of B bytes takes B / 1e9 s (2(n-1)/n = 1)
LINK = Link("test", 1e9, 0.0, "hand-made")


def _step(buckets, step_time=1.0, exposed=0.0, step=5):
    return {"step": step, "step_time": step_time, "exposed": exposed,
            "buckets": [{"start": s, "bytes": b} for s, b in buckets],
            "phases": {"backward": (0.1, max(s for s, _ in buckets))}}


def test_a_bucket_ready_after_the_previous_one_finished_starts_when_it_is_ready():
    s = replay_step(_step([(0.1, 10_000_000), (0.5, 10_000_000)]), LINK, 2)  # 10 ms each
    assert s.sends[1][0] == pytest.approx(0.5)
    assert s.sends[1][1] == pytest.approx(0.51)
    # ready before the first is done: it waits for the stream instead
    q = replay_step(_step([(0.1, 10_000_000), (0.105, 10_000_000)]), LINK, 2)
    assert q.sends[1][0] == pytest.approx(0.11) and q.sends[1][0] > 0.105


def test_a_bucket_queued_behind_a_slow_one_starts_when_that_one_ends():
    s = replay_step(_step([(0.1, 300_000_000), (0.2, 1_000_000), (0.25, 1_000_000)]), LINK, 2)
    assert [a for a, _, _ in s.sends] == pytest.approx([0.1, 0.4, 0.401])
    assert s.busy == pytest.approx(0.302)


def test_the_last_bucket_exposed_is_exactly_its_tail_and_none_when_all_is_done_in_time():
    tail = replay_step(_step([(0.1, 1_000_000), (0.9, 50_000_000)], step_time=1.0), LINK, 2)
    assert tail.compute_done == pytest.approx(0.9)
    assert tail.exposed == pytest.approx(0.05)
    assert tail.predicted == pytest.approx(1.05) and tail.efficiency == pytest.approx(1 / 1.05)
    hidden = replay_step(_step([(0.1, 1_000_000), (0.2, 1_000_000), (0.9, 0)]), LINK, 2)
    assert hidden.exposed == 0.0 and hidden.predicted == pytest.approx(1.0)


def test_the_recorded_exposed_part_is_replaced_not_added():
    s = replay_step(_step([(0.9, 50_000_000)], step_time=1.2, exposed=0.2), LINK, 2)
    assert s.predicted == pytest.approx(1.0 + 0.05)


def test_one_rank_moves_nothing_and_the_ring_factor_grows_with_ranks():
    assert LINK.allreduce_time(1e9, 1) == 0.0
    assert replay_step(_step([(0.9, 50_000_000)]), LINK, 1).exposed == 0.0
    assert LINK.allreduce_time(1e9, 2) == pytest.approx(1.0)        # 2(n-1)/n = 1
    assert LINK.allreduce_time(1e9, 4) == pytest.approx(1.5)        # 2(n-1)/n = 1.5
    slow = Link("lat", 1e9, 1e-3, "hand-made")
    assert slow.allreduce_time(0, 4) == pytest.approx(6e-3)          # 2(n-1) latency-bound steps


def test_a_fit_becomes_the_same_link_it_was_fitted_from():
    fit = {"latency": 100e-6, "bandwidth": 2e9, "world_size": 2}
    link = from_fit(fit, 2)
    assert link.allreduce_time(4e6, 2) == pytest.approx(100e-6 + 4e6 / 2e9)
    with pytest.raises(ValueError, match="2 or more ranks"):
        from_fit(fit, 1)


def test_every_row_of_the_link_table_says_where_its_figure_comes_from():
    assert {"pcie4-x16", "pcie4-x4", "nvlink4-h100", "3090-nvlink-bridge"} <= LINKS.keys()
    for link in LINKS.values():
        assert link.bus_bandwidth > 0 and link.step_latency > 0 and "estimate" in link.source
    assert LINKS["pcie4-x16"].bus_bandwidth > LINKS["pcie4-x4"].bus_bandwidth


def test_a_bridge_of_two_cards_predicts_for_two_ranks_only():
    assert whatif("case1-h200-broken", "3090-nvlink-bridge", 2).median("exposed") > 0
    with pytest.raises(ValueError, match="joins at most 2 ranks, not 4"):
        whatif("case1-h200-broken", "3090-nvlink-bridge", 4)
    rows = whatif_table("case1-h200-broken", ["3090-nvlink-bridge", "pcie4-x16"], (2, 4))
    assert [(r["link"], r["world_size"]) for r in rows] == [("3090-nvlink-bridge", 2), ("pcie4-x16", 2),
                                                             ("pcie4-x16", 4)]


def test_a_run_without_per_bucket_times_is_refused_saying_which_mode_keeps_them():
    light = [{"steps": [{"step": i, "step_time": 0.01, "allreduce": 0.001} for i in range(5)]}]
    with pytest.raises(ValueError, match="mode 'full'"):
        whatif(light, "pcie4-x16", 2)
    with pytest.raises(ValueError, match="link 'pcie9'"):
        whatif(light, "pcie9", 2)


def test_the_recorded_m3ae_run_replays_over_the_table():
    slow = whatif("case1-h200-broken", "pcie4-x4", 2)
    fast = whatif("case1-h200-broken", "nvlink4-h100", 2)
    assert len(fast.steps) == 28                                      # 30 recorded, 2 left out as warm-up
    assert slow.median("exposed") > 10 * fast.median("exposed") > 0   # the last buckets wait on a slow link
    assert fast.median("efficiency") > slow.median("efficiency")
    text = str(slow)
    assert "a model, not a measurement" in text and "one stream" in text and "PCI-SIG" in text
    rows = whatif_table("case1-h200-broken", ["pcie4-x16"], (2, 4))
    assert [r["world_size"] for r in rows] == [2, 4] and rows[1]["epoch"] < rows[0]["epoch"]
    assert "pcie4-x16" in table_text(rows)


def test_the_command_line_refuses_a_record_it_cannot_replay_in_one_line():
    out = subprocess.run([sys.executable, "-m", "ddp_lessons", "whatif", "case2-h200-posted"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].count("mode 'full'") == 1
    ok = subprocess.run([sys.executable, "-m", "ddp_lessons", "whatif", "case1-h200-broken", "--link",
                         "pcie3-x16"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "exposed per step" in ok.stdout


def test_whatif_takes_what_diagnose_takes_and_says_what_it_mixes():
    from _sim import MIB, simulate
    from ddp_lessons import Run
    two = simulate(world=2, n=20, transfer=0.05, buckets=[(8 * MIB, 0.5, 0.001), (8 * MIB, 1.0, 0.0)], passes=2)
    p = whatif(Run(two), "pcie4-x16", 2)
    assert any("a CPU run with a GPU link" in n for n in p.notes)
    # 10 steps per pass on each of 2 ranks: 20 per epoch in all, split over 4 ranks: 5 each
    assert p.steps_per_epoch == 20 and whatif(two, "pcie4-x16", 4).epoch_predicted == pytest.approx(
        5 * whatif(two, "pcie4-x16", 4).median("predicted"))
    # the recorded 50 ms exposed all-reduce swapped for PCIe's: faster than recorded, and it says why
    assert p.median("efficiency") > 1 and any("efficiency above 1" in n for n in p.notes)
    assert "efficiency above 1" in str(p)
    fitted = from_fit({"latency": 1e-4, "bandwidth": 1e9, "world_size": 2}, 2)
    assert not any("GPU link" in n for n in whatif(two, fitted, 2).notes)
    long = whatif(two, "pcie4-x16", 2, epochs=100)
    assert long.run_predicted == pytest.approx(100 * long.epoch_predicted) and "100 epochs" in str(long)
    assert whatif(two, "pcie4-x16", 2, iterations=1000).run_predicted == pytest.approx(1000 * p.median("predicted"))
    with pytest.raises(ValueError, match="not both"):
        whatif(two, "pcie4-x16", 2, epochs=1, iterations=1)
