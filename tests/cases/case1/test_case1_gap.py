"""Case 1's model of the post's gap (notebook 03): its arithmetic on made-up recorded runs, each way it
can come out: a batch floored or scaled, ruled out, reaching 133 s or not."""

import math

import pytest

from ddp_lessons import Run
from ddp_lessons.cases.case1 import gap

N = 3000   # made-up training questions
GB = 1e9


def _run(batch, fwd, bwd, opt, nbytes=1.5 * GB, buckets=4, peak=10 * 2**30):
    """A recorded one-GPU run: 6 identical steps, the buckets handed over evenly across the backward."""
    steps = []
    for i in range(6):
        ready = [fwd + bwd * (k + 1) / buckets for k in range(buckets)]
        steps.append({"step": i, "step_time": fwd + bwd + opt, "forward": fwd, "backward": bwd, "optimizer": opt,
                      "exposed": 0.0, "phases": {"forward": [0, fwd], "backward": [fwd, fwd + bwd]},
                      "buckets": [{"start": t, "bytes": nbytes / buckets} for t in ready]})
    return Run([{"rank": 0, "batch_size": batch, "grad_bytes": int(nbytes), "max_memory_bytes": peak,
                 "timer": {"rank": 0, "world_size": 1, "device": "cuda:0", "steps": steps}}])


RUNS = {8: _run(8, 0.02, 0.04, 0.01), 32: _run(32, 0.08, 0.16, 0.01)}


def test_a_recorded_batch_is_floored_and_a_smaller_one_scaled():
    assert gap.source(RUNS, 8) == 8 and gap.source(RUNS, 4) == 8 and gap.source(RUNS, 64) == 32
    c8, c4 = gap.column(RUNS, 8, "pcie4-x16", 2.0, N, 0), gap.column(RUNS, 4, "pcie4-x16", 2.0, N, 0)
    assert c8.floored and not c4.floored
    assert c8.gpu == pytest.approx(2.0 * (0.02 + 0.04 + 0.01))
    assert c4.gpu == pytest.approx(2.0 * (0.5 * 0.06 + 0.01))   # scaled down: not floored


def test_t1_is_the_gpu_work_and_the_rest_of_the_posts_step():
    c = gap.column(RUNS, 32, "pcie4-x16", 2.0, N, 0)
    assert c.t1 == pytest.approx(105 / math.ceil(N / 32)) and c.rest == pytest.approx(c.t1 - c.gpu)
    # the split epoch without the link: half the steps of the post's one-GPU step
    assert c.epochs[gap.ROWS[0]] == pytest.approx(math.ceil(N / 64) * c.t1)


def test_a_slow_link_reaches_133_s_where_a_fast_one_does_not():
    slow = {8: _run(8, 0.002, 0.004, 0.001, nbytes=6 * GB)}
    assert gap.reaching(gap.table(slow, (8,), "pcie4-x16-no-p2p", 1.0, N, 0)) == [8]
    assert gap.reaching(gap.table(slow, (8,), "nvlink4-h100", 1.0, N, 0)) == []


def test_a_batch_whose_gpu_work_exceeds_the_posts_step_is_ruled_out():
    heavy = {8: _run(8, 0.2, 0.4, 0.1)}       # 2 x 0.7 s against 105 s / 375 steps = 0.28 s
    c = gap.column(heavy, 8, "pcie4-x16", 2.0, N, 0)
    assert c.rest < 0 and gap.ruled_out(c) and gap.reaching({8: c}) == []
    assert "      -" in gap.lines({8: c})[1]


def test_a_batch_over_24_gib_is_ruled_out():
    big = {64: _run(64, 0.02, 0.04, 0.01, peak=30 * 2**30)}
    assert not gap.column(big, 64, "pcie4-x16", 1.0, N, 0).fits


def test_needed_exposed_is_the_posts_arithmetic():
    # batch 30: 100 one-GPU steps of 1.05 s; 50 per rank on two: 133 / 50 - 1.05 = 1.61 s
    assert gap.needed_exposed(30, N) == pytest.approx(133 / 50 - 1.05)


def test_lines_mark_what_reaches_133_s_and_what_is_scaled():
    cols = gap.table({8: _run(8, 0.002, 0.004, 0.001, nbytes=6 * GB)}, (4, 8), "pcie4-x16-no-p2p", 1.0, N, 0)
    head, *rows = gap.lines(cols)
    assert head.split()[-2:] == ["4~", "8"]
    assert "*" in rows[1] and "*" not in rows[0]
    (only,) = gap.lines(cols, rows=gap.ROWS[1:2], label="a link")
    assert only.startswith("a link")


def test_no_p2p_halves_the_bandwidth_as_the_link_table_does():
    from ddp_lessons.tool.predict import LINKS
    x16 = gap.no_p2p("pcie4-x16")
    assert x16.bus_bandwidth == pytest.approx(LINKS["pcie4-x16-no-p2p"].bus_bandwidth)
    assert x16.step_latency == pytest.approx(LINKS["pcie4-x16-no-p2p"].step_latency)
    assert "no peer-to-peer" in gap.no_p2p("pcie4-x4").source


def test_link_rows_name_both_slots_of_one_bandwidth():
    from ddp_lessons.tool.predict import LINKS
    # a PCIe 4.0 lane carries two PCIe 3.0 lanes' worth: x8 = 3.0 x16, x4 = 3.0 x8 (half of 3.0 x16)
    assert LINKS["pcie4-x8"].bus_bandwidth == pytest.approx(LINKS["pcie3-x16"].bus_bandwidth)
    assert LINKS["pcie4-x4"].bus_bandwidth == pytest.approx(LINKS["pcie3-x16"].bus_bandwidth / 2, rel=0.01)
    assert gap.SLOW_LINK in gap.LINK_ROWS
    assert any("P2P" in label and "no P2P" not in label for label in gap.LINK_ROWS)


def test_link_rows_give_one_table_per_row_and_the_slow_link_is_slower():
    rows = gap.link_rows(RUNS, (8, 32), 2.0, N)
    assert list(rows) == list(gap.LINK_ROWS)
    slow, fast = rows[gap.SLOW_LINK][8], rows["PCIe 4.0 x16, P2P"][8]
    assert slow.exposed > fast.exposed and slow.epochs[gap.ROWS[1]] > fast.epochs[gap.ROWS[1]]
    faster = rows["3090 computing 2x faster (x16, no P2P)"][32]
    assert faster.gpu == pytest.approx(1.0 * (0.08 + 0.16 + 0.01))   # the factor halved
