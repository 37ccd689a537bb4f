"""Case 2's claims (ddp_lessons.cases.case2.verdicts.runs, hookread): every claim
comes out each way it can, from numbers made up to sit on either side, with its outcome's sentence."""

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


def test_diagnose_ranks_startup_first_needs_both():
    from ddp_lessons.course.diagnosis_verdicts import ranks_first

    def both(a, b):
        return C.diagnose_ranks_startup_first(ranks_first(a, "startup", "start-up"), ranks_first(b, "startup", "f"))
    v = both(["startup", "validation"], ["startup"])
    assert v.holds and "start-up first for the posted test and for the fixed" in str(v)
    v = both(["startup"], ["data", "startup"])
    assert v.fails and "data for the fixed one" in str(v)


def test_every_case2_verdict_prints_its_outcome_s_sentence_and_one_figure():
    held = C.one_device_vs_forked([0.2, 0.3, 0.25, 0.2, 0.3], [0.5, 0.6, 0.4, 0.45, 0.5], 3, 2)
    lost = C.one_device_vs_forked([0.5, 0.6, 0.4, 0.45, 0.5], [0.2, 0.3, 0.25, 0.2, 0.3], 2, 2)
    assert "one process finished the same fit sooner than 3 workers" in str(held) and "oversubscribed" in str(held)
    assert "2 workers forked by ddp_notebook finished" in str(lost) and "oversubscribed" not in str(lost)
    assert "deciding numbers: 1 process / 3 forked" in str(held)
    assert "more than 2x their whole fit" in str(C.startup_vs_fit(5.0, [0.5, 0.6]))
    assert "less than 2x their fit" in str(C.startup_vs_fit(0.5, [0.5, 0.6]))
    assert "once per optimizer step: 3 of an epoch's 7" in str(C.syncs_per_epoch([0, 0, 1, 0, 0, 1, 1], 1667, 256, 3))
    assert "on 7 of 7 micro-steps" in str(C.syncs_per_epoch([1] * 7, 1667, 256, 3))
    n = 538_628
    assert "latency-bound" in str(C.bytes_vs_latency([{"latency": 0.1, "bandwidth": 1e9}], n))
    assert "bandwidth-bound" in str(C.bytes_vs_latency([{"latency": 1e-5, "bandwidth": 1e9}], n))
    assert "most of its hook interval waiting" in str(C.hook_vs_standalone(0.007, 0.0012, 0.0008))
    assert "at most half of it is waiting" in str(C.hook_vs_standalone(0.0015, 0.0012, 0.0008))
    slow, fast = [0.03, 0.028, 0.031, 0.029, 0.03], [0.02, 0.019, 0.021, 0.018, 0.02]
    assert "tensors made once beat" in str(C.randn_loader(slow, fast))
    assert "drawing torch.randn per item beat" in str(C.randn_loader(fast, slow))
    assert "cannot tell" in str(C.log_every_step(slow, [0.028, 0.03, 0.027, 0.031, 0.029]))
    for v in (held, C.randn_loader(slow, fast)):
        assert str(v).count("\n") == 1 and "rule" not in str(v)   # one sentence, one short figure


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
    # one round in which both fits ran alike (the machine took a core for it) does not decide it
    assert C.log_every_step(slow + [0.02], fast + [0.02]).holds
    assert C.log_every_step(slow[:4], fast[:4]).status == U                      # too few rounds


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
    assert C.nvml_in_step(mixed).status == U and "the record cannot tell" in str(C.nvml_in_step(mixed))
    faster = _pairs(nvml_fwd=(0.5e-3,) * 5, nvml_step=(3e-3,) * 5)
    assert C.nvml_in_training_step(faster).fails and C.nvml_in_step(faster).fails
    assert "was faster with the post's NVML block" in str(C.nvml_in_training_step(faster))
    assert "On the recorded CPU stand-in the post's NVML block made training_step slower" in str(
        C.nvml_in_training_step(rec))
    rec["machine"] = {"gpus": ["NVIDIA H200"]}
    assert str(C.nvml_in_training_step(rec)).startswith("verdict: On the recorded NVIDIA H200")
    assert C.nvml_added(rec)[0] == pytest.approx(0.9e-3)


def test_posted_vs_fixed_each_way():
    rec = _pairs()
    assert C.posted_vs_fixed(rec).holds and C.posted_vs_fixed(rec, "step").holds
    swapped = copy.deepcopy(rec)
    for r in swapped["results"]["runs"]:
        r["wall"] = {"fixed": 1.0, "posted": 0.4}.get(r["name"], r["wall"])
    assert C.posted_vs_fixed(swapped).fails and "the posted test took less time" in str(C.posted_vs_fixed(swapped))
    swapped["results"]["runs"][2]["wall"] = 2.0   # round 0: posted slower again
    assert C.posted_vs_fixed(swapped).status == U


def test_claims_read_the_stored_gpu_record():
    # The record's own shape (not its numbers): every variant has 5 rounds of every key.
    from ddp_lessons.tool import records
    rec = records.load("case2-h200-pairs")
    for name in ("posted", "fixed", "fixed-nvml"):
        for key in C.KEYS:
            assert len(C.per_round(rec, name, key)) == rec["config"]["rounds"]




def test_the_run_taken_apart_adds_up():
    from ddp_lessons.cases.case2.lightning_timer import launched, one_process, plot_run
    rank = {"t_entered": 103.0, "t_fit_start": 105.0, "t_fit_end": 106.5, "wall": 1.5, "timer": {"startup": 0.1}}
    parts = launched([rank, dict(rank, t_fit_end=106.0)], t_call=100.0, t_return=108.0, torch_start_s=1.2)
    assert sum(parts.values()) == pytest.approx(8.0)          # the kernel's wait, every second of it placed
    assert parts["spawn, launcher, rendezvous (the rest)"] == pytest.approx(1.8)
    assert parts["exit (leave group, return)"] == pytest.approx(1.5)
    one = one_process(1.2, 3.0, {"wall": 0.5, "timer": {"startup": 0.1}})
    assert sum(one.values()) == pytest.approx(3.5) and set(one) <= set(parts)
    assert len(plot_run({"one": one, "launched": parts}, "t").axes) == 1
