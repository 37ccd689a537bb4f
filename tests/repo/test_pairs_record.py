"""benchmarks/pairs_record.py: the rounds loop of the GPU pair recording, with fake runs (no launch)."""

import time
from pathlib import Path

import _benchmarks
import pytest

from ddp_lessons.tool import records, spread


@pytest.fixture(scope="module")
def pr():
    return _benchmarks.load("pairs_record")


def _sink(tmp_path, names=("a", "b"), rounds=5):
    return {"kind": "test-pairs", "path": str(tmp_path / "t.json"), "config": {}, "backend": None,
            "order": spread.interleave(names, rounds), "pairs": [("a", "b", "is b faster?")], "log": None}


def test_rounds_pairs_and_saves_after_every_run(pr, tmp_path):
    sink = _sink(tmp_path)
    saved = []

    def run_one(name, value):
        if Path(sink["path"]).exists():
            saved.append(len(records.load(sink["path"])["results"]["runs"]))
        return pr.step_row([9.0] + [value] * 5, skip=1, wall=value * 6)

    rows = pr.run_rounds({"a": 0.2, "b": 0.1}, sink, run_one, deadline=time.time() + 60)
    assert len(rows) == 10 and saved == list(range(1, 10))     # the record grows run by run
    assert [r["name"] for r in rows[:4]] == ["a", "b", "b", "a"]
    assert rows[0]["summary"]["median"] == 0.2 and rows[0]["steady"]
    pr.finish(sink, rows)
    res = records.load(sink["path"])["results"]
    assert res["status"] == "complete" and res["rounds_done"] == 5
    (p,) = res["pairs"]
    assert p["ratios"] == [0.5] * 5 and p["verdict"] == spread.B_FASTER and p["faster"] == "b"
    assert p["wall"]["median_ratio"] == 0.5
    assert res["steady"] == {"limit_iqr_rel": 0.05, "runs": 10, "within": 10, "worst_iqr_rel": 0.0}


def test_a_failing_variant_is_recorded_and_the_rest_runs(pr, tmp_path):
    sink = _sink(tmp_path, rounds=3)

    def run_one(name, value):
        if name == "b":
            raise RuntimeError("no NVML here")
        return pr.step_row([value] * 4, skip=2, wall=1.0)

    rows = pr.run_rounds({"a": 0.2, "b": 0.1}, sink, run_one, deadline=time.time() + 60)
    assert [r["ok"] for r in rows if r["name"] == "a"] == [True] * 3
    bad = [r for r in rows if r["name"] == "b"]
    assert len(bad) == 3 and bad[0]["error"] == "RuntimeError: no NVML here"
    pr.finish(sink, rows)
    (p,) = records.load(sink["path"])["results"]["pairs"]
    assert p["rounds"] == 0 and p["verdict"].startswith("not resolvable")


def test_no_round_starts_past_the_budget(pr, tmp_path):
    sink = _sink(tmp_path, rounds=5)

    def run_one(name, value):
        time.sleep(0.05)
        return pr.step_row([value] * 3, skip=0, wall=1.0)

    rows = pr.run_rounds({"a": 0.2, "b": 0.1}, sink, run_one, deadline=time.time() + 0.15)
    assert pr.rounds_done(rows) == 1   # a round takes ~0.1 s: a second would end past the deadline
    pr.finish(sink, rows)
    assert records.load(sink["path"])["results"]["status"] == "stopped by the time budget after 1 of 5 rounds"
