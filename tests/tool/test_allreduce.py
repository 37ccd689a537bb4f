"""All-reduce benchmark arithmetic: busbw as nccl-tests defines it, the fit."""

import pytest

from ddp_lessons.tool import allreduce
from ddp_lessons import launch


def test_fit_recovers_a_known_latency_and_bandwidth():
    lat, bw = 50e-6, 2e9
    rows = [{"bytes": b, "time": lat + b / bw} for b in allreduce.default_sizes(4096, 2**26)]
    fit = allreduce.fit_latency_bandwidth(rows)
    assert fit["latency"] == pytest.approx(lat, rel=1e-6)
    assert fit["bandwidth"] == pytest.approx(bw, rel=1e-6)
    assert fit["max_rel_error"] < 1e-9
    assert allreduce.predict_time(1e6, fit) == pytest.approx(lat + 1e6 / bw)


def test_a_term_the_sizes_cannot_resolve_is_said_so_not_printed_as_a_number():
    lat, bw = 50e-6, 2e9
    small = [{"bytes": b, "time": lat * (1 + 0.01 * (i % 2))} for i, b in enumerate((512, 1024, 2048, 4096))]
    fit = allreduce.fit_latency_bandwidth(small)  # 4 KiB at 2 GB/s is 2 us of a 50 us call: noise
    assert fit["latency_resolved"] and not fit["bandwidth_resolved"]
    assert "bandwidth not resolvable" in allreduce.describe_fit(fit) and "GB/s" not in allreduce.describe_fit(fit)
    big = [{"bytes": b, "time": b / bw} for b in (2**24, 2**25, 2**26)]
    fit = allreduce.fit_latency_bandwidth(big)
    assert fit["bandwidth_resolved"] and not fit["latency_resolved"]
    assert "latency not resolvable" in allreduce.describe_fit(fit)
    full = allreduce.fit_latency_bandwidth([{"bytes": b, "time": lat + b / bw}
                                            for b in allreduce.default_sizes(4096, 2**26)])
    assert allreduce.describe_fit(full) == "fit: latency 50.0 us, bandwidth 2.00 GB/s (algbw)"


def test_busbw_is_algbw_times_2_n_minus_1_over_n():
    fake = [{"world_size": 4, "sizes": [1000], "iters": [[0.001, 0.002, 0.001]]},
            {"world_size": 4, "sizes": [1000], "iters": [[0.001, 0.001, 0.003]]}]
    (row,) = allreduce.summarize(fake)
    assert row["time"] == 0.002  # median over iterations of the slowest rank: (1, 2, 3) ms
    assert row["best"] == 0.001
    assert row["algbw"] == pytest.approx(1000 / 0.002)
    assert row["busbw"] == pytest.approx(row["algbw"] * 2 * 3 / 4)


def test_sizes_are_powers_of_two():
    assert allreduce.default_sizes(4096, 65536) == [4096, 8192, 16384, 32768, 65536]


def test_live_sweep_returns_every_size_on_every_rank():
    sizes = [4096, 2**20]
    out = launch(allreduce.sweep, (sizes, 3, 1), world_size=2)
    assert [r["rank"] for r in out] == [0, 1]
    assert all(r["sizes"] == sizes and [len(t) for t in r["iters"]] == [3, 3] for r in out)
