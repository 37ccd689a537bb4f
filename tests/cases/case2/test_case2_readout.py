"""Case 2's readings: records and runs read as numbers, with their provenance; the launch record taken
apart; the payback model; the recorded pairs' per-round values."""

import pytest

from ddp_lessons.cases.case2 import launch_cost as L
from ddp_lessons.cases.case2 import readout as R
from ddp_lessons.tool import records


def _machine(**kw):
    return {"gpus": [], "cpu_count": 2, "cpu_affinity": 2, "cpu_model": "x", "torch": "2.13.0+cpu",
            "python": "3.11", **kw}


def test_record_line_names_the_commit_and_an_uncommitted_tree():
    rec = {"machine": _machine(), "created": "2026-12-05T00:00:00", "commit": "abcdef1234+dirty"}
    assert "recorded 2026-12-05 at commit abcdef1, from an uncommitted tree" in R.record_line(rec)
    assert "no recorded commit" in R.record_line(dict(rec, commit=None))


def test_record_line_on_the_stored_gpu_records():
    line = R.record_line(records.load("case2-h200-posted"))
    assert line.startswith("1x NVIDIA H200") and "no recorded commit" in line and "torch 2.11" in line


def _launch(setup, rnd, t_call, imported, built, train_start, train_end, t_exit, extra_ranks=0):
    r0 = {"rank": 0, "pid": 10, "ppid": 1, "argv": ["s.py", "--devices", "3"], "first_line": t_call + 0.1,
          "imported": imported, "built": built, "train_start": train_start, "train_end": train_end}
    others = [{"rank": i, "pid": 10 + i, "ppid": 10, "argv": r0["argv"], "first_line": built + 0.2,
               "train_start": train_start} for i in range(1, 1 + extra_ranks)]
    return {"setup": setup, "round": rnd, "t_call": t_call, "t_exit": t_exit, "wall": t_exit - t_call,
            "ranks": [r0, *others], "load_before": 0.5 + rnd, "load_after": 0.7 + rnd}


def test_a_launch_taken_apart_adds_up_and_the_epochs_are_left_out():
    run = _launch("cpu:3:ddp", 0, 100.0, 102.5, 102.6, 105.0, 105.4, 106.5, extra_ranks=2)
    parts = L.parts(run)
    assert sum(parts.values()) == pytest.approx(run["wall"])
    assert parts[L.EPOCHS] == pytest.approx(0.4) and L.launch_s(run) == pytest.approx(6.1)
    assert L.other_ranks(run) == [
        {"rank": i, "child_of_rank0": True, "same_command": True, "script_began_after_fit_call": pytest.approx(0.2),
         "to_first_epoch": pytest.approx(2.2)} for i in (1, 2)]
    assert len(L.plot_parts({"3 ranks": parts}).axes) == 1


def test_the_launch_record_read_per_round_with_its_load():
    runs = [_launch("cpu:1:auto", r, 0.0, 2.5, 2.6, 2.8, 3.2, 4.0 + r) for r in range(3)]
    runs += [_launch("cpu:3:ddp", r, 0.0, 2.5, 2.6, 5.0, 5.2, 6.5 + r, extra_ranks=2) for r in (2, 0, 1)]
    rec = {"results": {"runs": runs}}
    assert R.launch_rounds(rec, "cpu:1:auto") == pytest.approx([3.6, 4.6, 5.6])
    assert R.launch_rounds(rec, "cpu:3:ddp") == pytest.approx([6.3, 7.3, 8.3])     # in round order
    assert R.launch_parts(rec, "cpu:3:ddp")["fit set-up (other ranks start, rendezvous)"] == pytest.approx(2.4)
    assert R.load_range(rec) == pytest.approx((0.5, 2.7))


def test_extra_launch_and_the_mpi_singletons_per_rank():
    runs = [_launch("cpu:1:auto", r, 0.0, 2.5, 2.6, 2.8, 3.2, 4.0 + r) for r in range(2)]
    runs += [_launch("cpu:3:ddp", r, 0.0, 2.5, 2.6, 5.0, 5.2, 6.5 + 2 * r, extra_ranks=2) for r in range(2)]
    rec = {"results": {"runs": runs}}
    assert R.extra_launch(rec) == pytest.approx([2.7, 3.7])
    assert R.mpi_singletons(rec, "cpu:3:ddp") == (0, 6)
    orted = "--hnp --set-sid --report-uri 8 --singleton-died-pipe 9 -mca state_novm_select 1"
    for run in runs:
        run["ranks"][0]["children"] = [orted, "s.py --devices 3"]
    assert R.mpi_singletons(rec, "cpu:3:ddp") == (2, 6) and R.mpi_singletons(rec, "cpu:1:auto") == (2, 2)


def test_the_break_even_share_of_an_epoch():
    assert R.breakeven_share(12.0, 0.25, epochs=200) == pytest.approx(0.76)
    assert R.breakeven_share(60.0, 0.25, epochs=200) < 0      # the launch alone outlasts the run


def test_an_epoch_split_adds_up_on_both_sides():
    s = R.EpochSplit(one_epoch=0.3, train=(0.10, 0.12, 0.14), validation=(0.05, 0.06, 0.07), batches=(20, 7),
                     ddp_step=1e-3, allreduce=1e-4, syncs=3)
    assert s.fixed == pytest.approx(0.3 - 0.12 - 0.06)
    assert s.n_epoch() == pytest.approx(0.12 + 0.18 * 7 / 20 + 7e-3 + 3e-4)
    assert sum(a for a, _ in s.parts().values()) == pytest.approx(0.3)
    assert sum(b for _, b in s.parts().values()) == pytest.approx(s.n_epoch())
    lo, hi = s.fraction_range()
    assert lo < s.fraction < hi     # more of the epoch splitting: a shorter n-GPU epoch
    assert s.launch_to_lose(epochs=100) == pytest.approx(100 * (0.3 - s.n_epoch()))
    assert R.breakeven_share(s.launch_to_lose(100), 0.3, epochs=100) == pytest.approx(s.fraction)


def test_payback_arithmetic():
    p = R.payback(3.0, 0.2, 0.1, epochs=200)
    assert p["per_epoch"] == pytest.approx(0.1) and p["breakeven_epochs"] == pytest.approx(30)
    assert p["net"] == pytest.approx(17.0) and p["over_run"] == pytest.approx(20.0)
    assert R.payback(3.0, 0.1, 0.2)["breakeven_epochs"] == float("inf")


def test_expected_syncs():
    assert R.expected_syncs(1667, 256, 3) == (7, 3)
    assert R.expected_syncs(1667, 256, 1) == (7, 7)


# -- the recorded GPU pairs: a record made up in its stored shape -----------------------------
def _run(name, rnd, step, fwd, wall, ok=True):
    return {"name": name, "round": rnd, "ok": ok, "summary": {"median": step}, "parts": {"forward": fwd},
            "wall": wall}


def test_per_round_reads_the_record_and_refuses_a_wrong_name():
    rec = {"results": {"runs": [_run("fixed", i, 3.5e-3, 0.8e-3, 0.4) for i in range(5)]}}
    assert R.per_round(rec, "fixed", "training_step") == [0.8e-3] * 5
    rec["results"]["runs"][0]["ok"] = False
    assert R.per_round(rec, "fixed", "wall")[0] is None
    with pytest.raises(ValueError, match="no variant 'fixd'"):
        R.per_round(rec, "fixd", "wall")
    with pytest.raises(ValueError, match="key="):
        R.per_round(rec, "fixed", "median")
    assert R.spread_line([1e-3, None, 3e-3]) == "median 2.00 ms (1.00 .. 3.00 over 2 rounds)"
    assert R.ratio_line([2, None, 4], [1, 1, 1], "b / a") == "b / a 0.25 .. 0.50 (2 rounds)"


def test_the_stored_gpu_pairs_have_every_variant_in_every_round():
    rec = records.load("case2-h200-pairs")
    for name in ("posted", "fixed", "fixed-nvml", "fixed-plain"):
        for key in R.KEYS:
            assert len(R.per_round(rec, name, key)) == rec["config"]["rounds"]
