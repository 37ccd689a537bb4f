"""Case 1's model of the post's gap (notebook 03): its arithmetic on made-up inputs, each way it can come out."""

import math

import pytest

from ddp_lessons.cases.case1 import gap

N = 3000  # made-up training questions


def test_split_data_and_a_short_exposure_stays_under_133_s():
    e = gap.epochs(N, 30, exposed=0.01, broadcast=0.0, evaluation=2.0)
    # batch 30: 100 steps on one GPU, 1.05 s each; 50 per rank on two
    assert e[gap.COMBOS[0]] == pytest.approx(52.5)
    assert e[gap.COMBOS[1]] == pytest.approx(50 * 1.06)
    assert e[gap.COMBOS[3]] == pytest.approx(50 * 1.06 + 2.0)
    assert all(v < gap.POST["two_gpu_s"] for v in list(e.values())[:4])
    # every rank going through all samples: 100 steps of 1.06 s, and the evaluation
    assert e[gap.COMBOS[4]] == pytest.approx(100 * 1.06 + 2.0)


def test_a_long_exposure_at_a_small_batch_reaches_133_s():
    e = gap.epochs(N, 3, exposed=0.12, broadcast=0.001, evaluation=2.0)
    # batch 3: 1000 steps of 0.105 s on one GPU; 500 per rank on two, each 0.105 + 0.121 s
    assert e[gap.COMBOS[2]] == pytest.approx(500 * 0.226)
    assert e[gap.COMBOS[3]] == pytest.approx(500 * 0.226 + 2.0)
    assert e[gap.COMBOS[3]] < gap.POST["two_gpu_s"] <= e[gap.COMBOS[4]]
    assert gap.epochs(N, 3, exposed=0.17, broadcast=0.0, evaluation=0.0)[gap.COMBOS[1]] >= gap.POST["two_gpu_s"]


REC = {"batch": 10, "forward": 0.001, "backward": 0.002, "optimizer": 0.05,
       "peak_bytes": 10 * 2**30, "fixed_bytes": 4 * 2**30}


def test_batch_window_from_compute_and_memory():
    # 105 s / 3000 = 35 ms per sample; at factor 5 the GPU work is 15 ms a sample + 0.25 s a step
    lo, hi = gap.batch_window(N, 5.0, REC)
    assert lo == math.ceil(0.25 / 0.020)                          # 13: smaller batches need more than 105 s
    assert hi == (24 - 4) * 10 // 6                               # 0.6 GiB of activations a sample
    assert gap.batch_window(N, 1.0, REC)[0] == 2                  # a faster GPU allows a smaller batch
    assert gap.batch_window(N, 20.0, REC)[0] == math.inf          # no batch fits the post's 105 s


def test_lines_mark_what_reaches_133_s():
    cols = {b: {"epochs": gap.epochs(N, b, 0.12, 0.0, 2.0)} for b in (3, 30)}
    head, *rows = gap.lines(cols, smallest=1)
    assert head.split()[-2:] == ["3", "30"]
    assert "227*" in rows[-1] and "*" not in rows[0]   # batch 3, every rank all samples
    (only,) = gap.lines(cols, smallest=10, combos=gap.COMBOS[:1], label="f 2")
    assert only.split()[-2] == "-"
