"""Case 2's claims (ddp_lessons.cases.case2.verdicts.runs, hookread): every claim
comes out each way it can, from numbers made up to sit on either side."""

import copy

import pytest

from ddp_lessons.tool import verdict as V
from ddp_lessons.cases.case2 import verdicts as C
from ddp_lessons.cases.case2 import hook_intervals as H

U = V.UNRESOLVED


def _rank(rank, ppid=10, external=True, same=True, children=0):
    return {"rank": rank, "ppid": ppid, "external": external, "same_group": same, "children": children}


def test_reused_processes_counts_every_rank():
    ok = [_rank(i) for i in range(3)]
    assert C.reused_processes(ok, 10).holds
    assert C.reused_processes(ok, 11).fails                              # not this kernel's children
    assert C.reused_processes(ok[:2] + [_rank(2, children=3)], 10).fails  # Lightning started processes
    assert C.reused_processes(ok[:2] + [_rank(2, same=False)], 10).fails


def test_one_device_vs_forked_is_decided_by_quartiles():
    one, forked = [0.2, 0.3, 0.25, 0.2, 0.3], [0.5, 0.6, 0.4, 0.45, 0.5]
    assert C.one_device_vs_forked(one, forked).holds
    assert C.one_device_vs_forked(forked, one).fails
    assert C.one_device_vs_forked(one, [0.5, 0.2, 0.4, 0.45, 0.5]).holds  # one disturbed round: still decided
    assert C.one_device_vs_forked(one, [0.25, 0.3, 0.28, 0.22, 0.35]).status == U  # middle halves overlap
    assert C.one_device_vs_forked(one[:2], forked[:2]).status == U     # too few rounds


def test_startup_vs_fit_per_rank():
    assert C.startup_vs_fit(5.0, [0.5, 0.6, 0.9]).holds
    assert C.startup_vs_fit(0.5, [0.5, 0.6, 0.9]).fails
    assert C.startup_vs_fit(1.5, [0.5, 0.6, 0.9]).status == U             # 3.0 .. 1.67 straddles 2


def test_expected_syncs_and_the_count_verdict():
    assert C.expected_syncs(1667, 256, 3) == (7, 3)
    assert C.expected_syncs(1667, 256, 1) == (7, 7)
    assert C.syncs_per_epoch([0, 0, 1, 0, 0, 1, 1], 1667, 256, 3).holds
    assert C.syncs_per_epoch([1] * 7, 1667, 256, 3).fails                # all-reducing every micro-step


def test_hook_vs_standalone():
    assert C.hook_vs_standalone(0.007, 0.0012, 0.0008).holds          # 5.8 .. 8.8
    assert C.hook_vs_standalone(0.0015, 0.0012, 0.0008).fails         # 1.25 .. 1.9
    assert C.hook_vs_standalone(0.002, 0.0012, 0.0008).status == U    # 1.67 .. 2.5


def test_bytes_vs_latency():
    def fit(lat, bw):
        return {"latency": lat, "bandwidth": bw}
    n = 538_628
    assert C.bytes_vs_latency([fit(1e-3, 1e9), fit(5e-4, 1e9)], n).holds   # ratios 0.54, 1.08
    assert C.bytes_vs_latency([fit(1e-5, 1e9), fit(2e-5, 1e9)], n).fails   # 54 and 27: bandwidth-bound
    assert C.bytes_vs_latency([fit(0.1, 1e9), fit(0.05, 1e9)], n).fails     # 0.005, 0.01: latency-bound
    assert C.bytes_vs_latency([fit(1e-3, 1e9), fit(1e-5, 1e9)], n).status == U   # 0.54 .. 54
    assert C.bytes_vs_latency([fit(0.0, 1e9)], n).fails                     # no latency at all


def test_startup_vs_allreduce_turns_with_the_epochs():
    startup, per_epoch = [4.7, 4.7, 4.7], [0.025, 0.03, 0.034]
    assert C.startup_vs_allreduce(startup, per_epoch, 2).holds
    assert C.startup_vs_allreduce(startup, per_epoch, 200).fails
    assert C.startup_vs_allreduce(startup, per_epoch, 50).status == U       # 3.76 .. 2.76 straddles 3
    cross = C.crossover_epochs(startup, per_epoch)
    assert cross[0] == pytest.approx(188) and min(cross) == pytest.approx(4.7 / 0.034)


def test_randn_loader_and_log_every_step():
    slow, fast = [0.03, 0.028, 0.031, 0.029, 0.03], [0.02, 0.019, 0.021, 0.018, 0.02]
    assert C.randn_loader(slow, fast).holds and C.randn_loader(fast, slow).fails
    # the machine slows between rounds, both setups alike: the per-round ratios still decide
    drift = [1, 1.5, 1, 2, 1.2]
    slowed = [[x * k for x, k in zip(xs, drift, strict=True)] for xs in (slow, fast)]
    assert C.randn_loader(*slowed).holds
    assert C.randn_loader(slow, [0.02, 0.03, 0.021, 0.018, 0.02]).status == U    # one round the other way
    assert C.randn_loader(slow[:2], fast[:2]).status == U                          # too few rounds to decide
    assert C.log_every_step(slow, fast).holds and C.log_every_step(fast, slow).fails
    assert C.log_every_step(slow, [0.028, 0.03, 0.027, 0.031, 0.029]).status == U


# -- hookread ---------------------------------------------------------------------------
def _times(rank, intervals, epochs=2):
    steps = [{"step": i, "allreduce": x, "allreduce_calls": int(x > 0)} for i, x in enumerate(intervals)]
    return {"rank": rank, "steps": steps, "epochs": [{}] * epochs}


def test_hookread_per_rank_and_wire_bound():
    ranks = [_times(0, [0.05, 0, 0.004, 0.010]), _times(1, [0.05, 0, 0.006, 0.002]),
             _times(2, [0.05, 0, 0.020, 0.030])]
    read = H.per_rank(ranks, skip=1)
    assert [r["median"] for r in read["ranks"]] == pytest.approx([0.007, 0.004, 0.025])
    assert (read["median_min"], read["median_max"]) == pytest.approx((0.004, 0.025))
    assert read["shortest_per_step"] == pytest.approx([0.004, 0.002])     # steps 2 and 3
    assert read["wire_bound"] == pytest.approx(0.003)
    assert read["longest_per_step"] == pytest.approx([0.020, 0.030])
    assert read["first_in"] == pytest.approx(0.025)
    assert H.per_epoch(ranks) == pytest.approx([0.032, 0.029, 0.05])
    assert "rank 2: median  25.00 ms" in H.table(read)
    with pytest.raises(ValueError, match="no all-reduce after step"):
        H.per_rank([_times(0, [0.05, 0, 0])], skip=1)


# -- the recorded GPU pairs: a record made up in its stored shape -----------------------------
def _run(name, rnd, step, fwd, wall, ok=True):
    return {"name": name, "round": rnd, "ok": ok, "summary": {"median": step},
            "parts": {"forward": fwd}, "wall": wall}


def _pairs(nvml_fwd=(1.7e-3, 1.3e-3, 1.3e-3, 2.2e-3, 1.6e-3), nvml_step=(5.2e-3, 4.1e-3, 4.1e-3, 6.6e-3, 4.9e-3)):
    runs = []
    for i in range(5):
        runs += [_run("fixed", i, 3.5e-3, 0.8e-3, 0.4), _run("fixed-nvml", i, nvml_step[i], nvml_fwd[i], 0.55),
                 _run("posted", i, 6e-3, 2e-3, 1.0)]
    return {"results": {"runs": runs}}


def test_per_round_reads_the_record_and_refuses_a_wrong_name():
    rec = _pairs()
    assert C.per_round(rec, "fixed", "training_step") == [0.8e-3] * 5
    rec["results"]["runs"][0]["ok"] = False
    assert C.per_round(rec, "fixed", "wall")[0] is None
    with pytest.raises(ValueError, match="no variant 'fixd'"):
        C.per_round(rec, "fixd", "wall")
    with pytest.raises(ValueError, match="key="):
        C.per_round(rec, "fixed", "median")
    assert C.spread_line([1e-3, None, 3e-3]) == "median 2.00 ms (1.00 .. 3.00 over 2 rounds)"


def test_nvml_claims_each_way():
    rec = _pairs()
    assert C.nvml_in_training_step(rec).holds
    assert C.nvml_in_step(rec).holds
    mixed = _pairs(nvml_step=(5.2e-3, 3.0e-3, 4.1e-3, 6.6e-3, 4.9e-3))
    assert C.nvml_in_step(mixed).status == U
    faster = _pairs(nvml_fwd=(0.5e-3,) * 5, nvml_step=(3e-3,) * 5)
    assert C.nvml_in_training_step(faster).fails and C.nvml_in_step(faster).fails
    assert C.nvml_added(rec)[0] == pytest.approx(0.9e-3)
    assert C.nvml_below_standalone(rec, 15.7e-3).holds
    assert C.nvml_below_standalone(rec, 0.3e-3).fails
    assert C.nvml_below_standalone(rec, 1.0e-3).status == U


def test_posted_vs_fixed_each_way():
    rec = _pairs()
    assert C.posted_vs_fixed(rec).holds and C.posted_vs_fixed(rec, "step").holds
    swapped = copy.deepcopy(rec)
    for r in swapped["results"]["runs"]:
        r["wall"] = {"fixed": 1.0, "posted": 0.4}.get(r["name"], r["wall"])
    assert C.posted_vs_fixed(swapped).fails
    swapped["results"]["runs"][2]["wall"] = 2.0   # round 0: posted slower again
    assert C.posted_vs_fixed(swapped).status == U


def test_claims_read_the_stored_gpu_record():
    # The record's own shape (not its numbers): every variant has 5 rounds of every key.
    from ddp_lessons.tool import records
    rec = records.load("case2-h200-pairs")
    for name in ("posted", "fixed", "fixed-nvml"):
        for key in C.KEYS:
            assert len(C.per_round(rec, name, key)) == rec["config"]["rounds"]



def test_nvml_held_vs_fresh_each_way():
    fresh = [15e-3, 16e-3, 15.5e-3, 14.8e-3, 15.2e-3]
    held = [5e-6, 4e-6, 6e-6, 4.5e-6, 5.5e-6]
    assert C.nvml_held_vs_fresh({"calls": fresh, "held": {"calls": held}}).holds
    assert C.nvml_held_vs_fresh({"calls": held, "held": {"calls": fresh}}).fails
    mixed = [14e-3, 16e-3, 15e-3, 15.5e-3, 14.5e-3]
    assert C.nvml_held_vs_fresh({"calls": fresh, "held": {"calls": mixed}}).status == U
