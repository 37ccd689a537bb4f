"""benchmarks/case2_levers.py on the CPU: a short run, and the record's shape (never its numbers)."""


import _benchmarks
import pytest

from ddp_lessons.tool import records
from ddp_lessons.cases.case2 import levers
from ddp_lessons.cases.case2.levers import catalog, rounds

SMALL = ["--device", "cpu", "--width", "32", "--batch", "16", "--rounds", "3", "--steps", "5", "--warmup", "1"]


@pytest.fixture(scope="module")
def script():
    return _benchmarks.load("case2_levers")


def test_cpu_run_saves_a_record_with_every_lever(script, tmp_path):
    path = script.main(SMALL + ["--out", str(tmp_path)])
    assert path == tmp_path / "case2-cpu-levers.json"
    rec = records.load(path)
    res = rec["results"]
    assert rec["kind"] == "case2-levers" and rec["machine"]["torch"]
    assert res["status"] == "complete" and res["rounds_done"] == 3 and res["device"] == "cpu"
    assert res["config"] == {"width": 32, "depth": 3, "batch": 16, "lr": 0.01, "seed": 0}
    assert set(res["levers"]) == set(levers.LEVERS)   # JSON keys come back sorted
    for name in levers.CUDA_ONLY:   # skipped with the reason, not lost
        assert res["levers"][name]["status"] == "skipped" and res["levers"][name]["reason"] == levers.CUDA_ONLY[name]
    ran = [n for n in levers.LEVERS if n not in levers.CUDA_ONLY]
    for name in ran:
        e = res["levers"][name]
        assert e["status"] == "ok" and [r["round"] for r in e["rounds"]] == [0, 1, 2]
        assert {"median", "iqr", "iqr_rel", "q1", "q3", "min", "max", "wall_per_step"} <= set(e["rounds"][0])
        assert all(r["n"] == 5 for r in e["rounds"])
        assert len(levers.medians(res, name)) == 3 and None not in levers.medians(res, name)
    assert [sorted(row) for row in res["order"]] == [sorted(ran)] * 3
    assert res["order"][0] != res["order"][1]   # interleaved, not the same order every round


def test_a_failing_lever_is_an_error_and_the_rest_run(monkeypatch, tmp_path):
    real = catalog.make_step

    def broken(name, *a):
        if name == "fused":
            raise RuntimeError("no fused kernel here")
        return real(name, *a)
    monkeypatch.setattr(catalog, "make_step", broken)
    res = rounds.run_levers(["fixed", "fused"], {"width": 16, "batch": 8}, rounds=3, steps=3, warmup=0,
                            device="cpu")
    assert res["levers"]["fused"] == {"description": levers.LEVERS["fused"], "rounds": [], "status": "error",
                                      "error": "RuntimeError: no fused kernel here"}
    assert res["levers"]["fixed"]["status"] == "ok" and len(res["levers"]["fixed"]["rounds"]) == 3


def test_budget_stops_cleanly_and_bad_input_is_refused(script, tmp_path):
    res = rounds.run_levers(["fixed"], {"width": 16, "batch": 8}, rounds=50, steps=2, warmup=0,
                            device="cpu", budget_s=0.0)
    assert res["status"] == "stopped by the time budget after 0 of 50 rounds" or res["rounds_done"] < 50
    assert res["levers"]["fixed"]["status"] == "skipped"      # budget spent before its set-up
    with pytest.raises(ValueError, match="unknown lever"):
        rounds.run_levers(["faster"], device="cpu")
    script.main(SMALL + ["--levers", "fixed", "--out", str(tmp_path / "r.json")])
    with pytest.raises(records.RecordError, match="exists: pass --overwrite"):
        script.main(SMALL + ["--levers", "fixed", "--out", str(tmp_path / "r.json")])
