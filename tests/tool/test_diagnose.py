"""`diagnose` and `compare`: every finding on a simulated run that must produce it and one that must
not (`_sim.simulate`: ranks in lockstep, as DDP runs them); the rules that read the run's context
(world size, cores, buckets, loader); each second charged once; real runs on two ranks."""

import _diag_workers as dw
import pytest
from _sim import MIB, simulate

from ddp_lessons import Run, compare, diagnose, launch
from ddp_lessons.tool import plots
from ddp_lessons.tool.diagnosis import CAUSES
from ddp_lessons.tool.diagnosis.causes import (ACCUMULATION, COLLECTIVES, DATA, EXPOSED, HOST_BOUND, JITTER,
                                              LAST_BUCKET, LATENCY, OUTSIDE, SMALL_BUCKETS, STARTUP, THREADS, UNTIMED,
                                              WAITING)
from ddp_lessons.tool.launcher.checks import default_start_method

EARLY_AND_LAST = [(8 * MIB, 0.3, 0.004), (8 * MIB, 0.6, 0.004), (32 * MIB, 1.0, 0.0)]
QUEUED = [(8 * MIB, 0.3, 0.06), (8 * MIB, 0.6, 0.06), (32 * MIB, 1.0, 0.0)]
SMALL = [(48 << 10, i / 24, 0.001) for i in range(24)]
GPU_PACED = dict(device="cuda:0", forward=0.004, bwd=0.004, opt=0.001)


def gpu(host_share, busy=None, lag=None, data=0.0):
    """A GPU run whose host took `host_share` of the device's time to issue forward and backward; `busy`: the
    GPU's busy share of the steps the doctor profiled in the same run; `lag`: how far behind the host the
    device was at each step's start."""
    ranks = simulate(world=1, data=data, **GPU_PACED)
    steps = ranks[0]["steps"]
    for s in steps:
        s["host"] = {k: host_share * (b - a) for k, (a, b) in s["phases"].items()}
        if lag is not None:
            s["lag"] = lag
    if busy is not None:   # the doctor's 5 steps profiled after its window, synchronised at both ends
        ranks[0]["doctor"] = {"busy": {"busy_s": busy * 0.05, "span_s": 0.05, "steps": 5, "after_window": True}}
    return ranks


CASES = {  # cause: (a run that must produce it, one that must not)
    OUTSIDE: (simulate(outside=[(0, 9, "eval", 2.0)]), simulate(outside=[(0, 9, "eval", 0.01)])),
    WAITING: (simulate(forward=[0.02, 0.03]), simulate()),
    JITTER: (simulate(forward=lambda r, k: 0.02 + 0.01 * ((r + k) % 2)), simulate()),
    EXPOSED: (simulate(transfer=0.02), simulate()),
    LATENCY: (simulate(transfer=0.02, forward=0.001, bwd=0.001, opt=0.001, buckets=[(128 << 10, 1.0, 0)]),
              simulate(transfer=0.02, forward=0.001, bwd=0.001, opt=0.001, buckets=[(64 * MIB, 1.0, 0)])),
    SMALL_BUCKETS: (simulate(buckets=SMALL), simulate(buckets=EARLY_AND_LAST)),
    LAST_BUCKET: (simulate(transfer=0.02, buckets=EARLY_AND_LAST), simulate(transfer=0.02, buckets=QUEUED)),
    ACCUMULATION: (simulate(micro=4, no_sync=False, transfer=0.02), simulate(micro=4, transfer=0.02)),
    DATA: (simulate(data=0.02), simulate()),
    UNTIMED: (simulate(between=0.5), simulate()),
    HOST_BOUND: (gpu(0.95, busy=0.2), gpu(0.95, busy=0.8)),
    THREADS: (simulate(threads=2, cores=2), simulate(threads=1, cores=2)),
    COLLECTIVES: (simulate(collectives=0.005), simulate(collectives=0.0001)),
}


@pytest.mark.parametrize("cause", list(CASES))
def test_each_finding_appears_when_its_numbers_say_so_and_only_then(cause):
    yes, no = CASES[cause]
    assert cause in diagnose(yes).causes, str(diagnose(yes))
    assert cause not in diagnose(no).causes, str(diagnose(no))


def test_the_vocabulary_is_complete_and_each_finding_says_what_to_do():
    assert set(CASES) | {STARTUP} == set(CAUSES)
    f = diagnose(simulate(outside=[(0, 9, "eval", 2.0)], data=0.02)).findings[0]
    assert f.change and f.check and len(f.per_rank) == 2 and 0 < f.share <= f.window_share <= 1
    assert f.status == "measured" and diagnose(simulate(buckets=SMALL)).finding(SMALL_BUCKETS).status == "suspected"
    # with an exposed transfer larger than the estimate, the small buckets' seconds are the extra calls'
    # share of it (22 of 24): merging sends the same bytes, so the rest stays the exposed all-reduce's
    exposed = diagnose(simulate(buckets=SMALL, transfer=0.05))
    small, rest = exposed.finding(SMALL_BUCKETS), exposed.finding(LATENCY)
    assert small.status == "measured" and EXPOSED not in exposed.causes
    assert small.seconds == pytest.approx(22 / 2 * rest.seconds, rel=1e-6)


def test_at_world_size_1_nothing_is_communicated_or_waited_for():
    d = diagnose(simulate(world=1, transfer=0.01))          # DDP's bookkeeping after the backward
    assert not {EXPOSED, WAITING, JITTER, LAST_BUCKET, LATENCY, SMALL_BUCKETS} & set(d.causes), str(d)
    assert any("world size 1" in c for c in d.confirmations)
    assert any("per-step overhead at world size 1" in n for n in d.notes)
    ev = diagnose(simulate(world=1, outside=[(0, 9, "eval", 2.0)])).finding(OUTSIDE)
    assert "less often" in ev.change and "only rank" not in ev.change


def test_start_up_is_its_own_line_never_a_cause_of_the_loop():
    d = diagnose(simulate(startup=30.0, data=0.02))
    assert STARTUP not in d.causes and d.causes[0] == DATA
    assert d.startup.seconds == pytest.approx(30.01) and "once per launch" in str(d)
    # shares against the window: 3% of the loop is listed though start-up makes it 1% of the wall
    small = diagnose(simulate(startup=30.0, data=0.0015, forward=0.02, bwd=0.02, opt=0.005))
    f = small.finding(DATA)
    assert f is not None and f.share < 0.03 <= f.window_share


def test_a_peers_evaluation_is_charged_to_it_once_over_the_whole_wait():
    # rank 0 evaluates 0.5 s after every 5th optimizer step while rank 1 goes on and waits for it
    ev = [(0, k, "eval", 0.5) for k in (4, 9, 14)]
    d = diagnose(simulate(outside=ev))
    f = d.finding(OUTSIDE)
    assert f.per_rank == pytest.approx([1.5, 1.5], rel=0.01), str(d)
    assert not {WAITING, JITTER, UNTIMED} & set(d.causes), str(d)
    # with accumulation under no_sync the wait lands micro-steps later; the charge is the same
    acc = diagnose(simulate(n=40, micro=4, outside=[(0, k, "eval", 0.5) for k in (3, 19, 35)]))
    assert acc.finding(OUTSIDE).per_rank == pytest.approx([1.5, 1.5], rel=0.01), str(acc)
    assert "one rank does it while the others wait" in acc.finding(OUTSIDE).change
    even = diagnose(simulate(outside=[(r, 9, "eval", 2.0) for r in (0, 1)])).finding(OUTSIDE)
    assert "every rank spends as long on it: if each does the whole of it" in even.change
    alone = diagnose(simulate(n=10, outside=[(0, 9, "eval", 2.0)])).finding(OUTSIDE)   # after the last all-reduce
    assert "the others did not wait for it" in alone.change


def test_a_slower_rank_is_named_only_by_a_margin_and_jitter_on_shared_cores_is_a_note():
    d = diagnose(simulate(forward=[0.02, 0.035]))
    w = d.finding(WAITING)
    assert "rank 1 was the late one at 100%" in w.detail and "'forward'" in w.change
    assert WAITING not in diagnose(simulate(forward=[0.02, 0.0202])).causes    # 1%: under the margin
    shared = diagnose(simulate(forward=lambda r, k: 0.02 + 0.01 * ((r + k) % 2), threads=1, cores=2))
    assert not {WAITING, JITTER} & set(shared.causes)
    assert any("share cores" in n and "jitter" in n for n in shared.notes), shared.notes


def test_the_last_bucket_says_whether_a_cap_helps_from_its_tensors_never_both():
    one = {"kind": "ddp", "bucket_cap_bytes": 25 * MIB, "bucket_tensors": [[8 * MIB], [8 * MIB], [32 * MIB]]}
    many = dict(one, bucket_tensors=[[8 * MIB], [8 * MIB], [4 * MIB] * 8])
    late = diagnose(simulate(transfer=0.02, buckets=EARLY_AND_LAST, model=one)).finding(LAST_BUCKET)
    split = diagnose(simulate(transfer=0.02, buckets=EARLY_AND_LAST, model=many)).finding(LAST_BUCKET)
    assert "no bucket cap helps" in late.change and "below its" not in late.change
    assert "below its 32 MiB" in split.change and "no bucket cap helps" not in split.change
    assert late.seconds == pytest.approx(18 * 0.02) and "32 of the 48 MiB in 3 buckets" in late.detail
    # the exposed transfer is the last bucket's, but for DDP's two warm-up steps (left out of the reading)
    assert EXPOSED not in diagnose(simulate(n=60, transfer=0.02, buckets=EARLY_AND_LAST, model=one)).causes
    shared = diagnose(simulate(transfer=0.02, buckets=EARLY_AND_LAST, model=many, threads=1, cores=2))
    assert "would not overlap here" in shared.finding(LAST_BUCKET).change and "below its" not in \
        shared.finding(LAST_BUCKET).change


def test_many_small_buckets_advise_a_larger_cap_and_one_bucket_a_smaller():
    f = diagnose(simulate(buckets=SMALL, model={"kind": "ddp", "bucket_cap_bytes": 50 << 10})).finding(SMALL_BUCKETS)
    assert "raise the bucket cap" in f.change and "24 buckets" in f.change
    one = {"kind": "ddp", "bucket_cap_bytes": 100 * MIB, "grad_bytes": 64 * MIB}
    exp = diagnose(simulate(transfer=0.02, buckets=[(64 * MIB, 1.0, 0)], model=one)).finding(EXPOSED)
    assert "one bucket" in exp.change and "bucket_cap_mb=16 gives about 4 buckets" in exp.change
    assert exp.knob == {"ddp": {"bucket_cap_mb": 16.0}}
    # on shared cores there is no core to overlap on: no smaller cap (it would plant small buckets again)
    shared = diagnose(simulate(transfer=0.02, buckets=[(64 * MIB, 1.0, 0)], model=one, threads=1, cores=2))
    assert "would not overlap here (the ranks share cores)" in shared.finding(EXPOSED).change
    assert "bucket_cap_mb=" not in shared.finding(EXPOSED).change


def test_small_buckets_fixed_cost_is_read_from_the_smallest_bucket():
    # two 16 KiB buckets at 1 ms among 600 KiB ones at 8 ms: their bytes are not a fixed cost per call
    mixed = [(16 << 10, 0.02, 0.001), (16 << 10, 0.04, 0.001)] + [(600 << 10, i / 24, 0.008) for i in range(2, 24)]
    f = diagnose(simulate(buckets=mixed)).finding(SMALL_BUCKETS)
    assert "x 1 ms" in f.detail and "smallest bucket (16 KiB)" in f.detail, f.detail


def test_loader_advice_reads_the_core_budget():
    full = diagnose(simulate(data=0.02, threads=1, cores=2)).finding(DATA)
    assert "no core is spare" in full.change and "will not help" in full.change
    busy = diagnose(simulate(data=0.02, threads=1, cores=2, loader={"num_workers": 1, "persistent_workers": True,
                                                                   "pin_memory": False})).finding(DATA)
    assert "already do" in busy.change and "fewer workers" in busy.change
    room = diagnose(simulate(data=0.02, threads=1, cores=8)).finding(DATA)
    assert "num_workers > 0" in room.change and "6 spare" in room.change


def test_accumulation_is_named_once_and_confirmed_when_right():
    d = diagnose(simulate(micro=4, no_sync=False, transfer=0.02))
    acc = d.finding(ACCUMULATION)
    assert "15 micro-steps" in acc.detail and "4 all-reduces per optimizer step" in acc.detail and acc.needs_code
    assert acc.seconds == pytest.approx(15 * 0.02) and d.finding(EXPOSED).seconds == pytest.approx(5 * 0.02)
    ok = diagnose(simulate(micro=4, transfer=0.02))
    assert any("4 micro-steps per optimizer step, all-reduced once per optimizer step" in c for c in ok.confirmations)


def test_host_bound_from_another_launchs_trace_is_only_suspected_and_nothing_communicated_on_one_gpu():
    d = diagnose(Run.load("own-run-h200x1", setup="broken"))
    assert d.causes[0] == HOST_BOUND and d.findings[0].status == "suspected", str(d)
    assert not {EXPOSED, WAITING, JITTER, LAST_BUCKET, LATENCY} & set(d.causes)
    assert "busy 6% of 3 traced steps" in d.findings[0].detail and "a launch of its own" in d.findings[0].detail
    assert any("CUDA events" in n for n in d.notes)


def test_host_bound_needs_a_busy_share_and_charges_only_the_idle_compute():
    """Measured only from a busy share of the same run; its seconds the idle share of the compute, never the
    data stall beside it (the H200 record's findings once summed to 115% of the window)."""
    d = diagnose(gpu(0.95, busy=0.25))
    f = d.finding(HOST_BOUND)
    compute = sum(s["forward"] + s["backward_compute"] + s["optimizer"] for s in gpu(0.95)[0]["steps"])
    assert f.status == "measured" and f.seconds == pytest.approx(0.75 * compute)
    d2 = diagnose(gpu(0.95, busy=0.25, data=0.004))
    assert d2.causes[:2] == [HOST_BOUND, DATA] and d2.finding(HOST_BOUND).seconds == pytest.approx(0.75 * compute)
    window = d2.findings[0].seconds / d2.findings[0].window_share
    assert sum(f.seconds for f in d2.findings) <= window + 1e-9
    # no busy share: the host's pace alone decides nothing; the queue's state is said as a fact
    paced = diagnose(gpu(0.95, lag=2e-5))
    assert HOST_BOUND not in paced.causes
    assert any("queue was empty at 100% of the steps' starts" in u for u in paced.undecided), paced.undecided
    assert any("queue was empty at 0%" in u for u in diagnose(gpu(0.95, lag=0.01)).undecided)


def test_configuration_notes_the_timer_can_see():
    wasted = {"kind": "ddp", "find_unused_parameters": True, "unused_parameter_bytes": 0}
    assert any("no parameter went unused" in n for n in diagnose(simulate(model=wasted)).notes)
    needed = dict(wasted, unused_parameter_bytes=4 * MIB)
    assert any("is needed" in c for c in diagnose(simulate(model=needed)).confirmations)
    synced = gpu(0.2)
    for s in synced[0]["steps"]:
        s["phases"]["log"] = (s["step_time"], s["step_time"])
        s["host"]["log"] = 0.5 * s["step_time"]
    assert any("host sync every step in phase 'log'" in n for n in diagnose(synced).notes)


def test_projection_by_epochs_or_iterations_keeps_start_up_once():
    ranks = simulate(data=0.02, startup=5.0, passes=2)
    d = diagnose(ranks, epochs=200)       # 100x the run: 40 s of data wait, start-up still 5 s
    assert d.causes[0] == DATA and d.findings[0].seconds == pytest.approx(40.0)
    assert d.startup.seconds == pytest.approx(5.01)
    assert any("projected to 200 epochs from the 2 measured" in n for n in d.notes)
    it = diagnose(simulate(data=0.02, micro=4, n=40), iterations=1000)   # 10 optimizer steps measured
    assert it.finding(DATA).seconds == pytest.approx(0.8 * 100) and "1000 optimizer steps" in it.notes[0]
    with pytest.raises(ValueError, match="iterations="):
        diagnose(simulate(), epochs=10)   # no passes over a loader: nothing to scale epochs from


def test_inputs_runs_dicts_with_a_workers_own_keys_and_records():
    ranks = simulate(outside=[(0, 9, "eval", 2.0)])
    assert diagnose([{"timer": r, "steps": 3, "loss": 0.1} for r in ranks]).causes[0] == OUTSIDE
    assert diagnose(Run(ranks)).causes[0] == OUTSIDE
    assert Run([{"timer": r, "epochs": [1]} for r in ranks])[1]["epochs"] == [1]
    with pytest.raises(ValueError, match="StepTimer result") as info:
        diagnose([{"loss": 0.1}])
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="several setups"):
        Run.load("own-run-h200x1")


def test_waits_are_worked_out_across_ranks_where_the_timers_took_no_common_reference():
    with_waits = simulate(forward=[0.02, 0.03])
    without = simulate(forward=[0.02, 0.03], waits=False)
    run = Run(without)
    assert [s["wait"] for s in run[0].steps()] == pytest.approx([s["wait"] for s in with_waits[0]["steps"]])
    assert WAITING in diagnose(run).causes


def test_it_prints_as_a_short_report():
    d = diagnose(simulate(outside=[(0, 9, "eval", 2.0)]))
    text = str(d)
    assert text.splitlines()[1].startswith(" 1. work outside the steps: eval [measured]")
    assert "<table>" in d._repr_html_() and d.table()[0][1] == "work outside the steps: eval"


def test_scores_put_each_rank_against_the_fastest_per_compute_phase():
    d = diagnose(simulate(forward=[0.02, 0.03]))
    assert d.scores["forward"] == pytest.approx([1.0, 2 / 3])
    assert "step_time" not in d.scores and diagnose(simulate(world=1)).scores == {}


# -- compare -------------------------------------------------------------------

def _repeats(world, step, jitter, k=5, micro=1):
    return [simulate(world, n=20 * micro, forward=step * (1 + jitter * (i - 2)) / micro, bwd=0.0, opt=0.0,
                     micro=micro) for i in range(k)]


def test_compare_gives_speed_up_efficiency_and_a_verdict_outside_the_noise():
    c = compare({"1 rank": _repeats(1, 0.02, 0.02), "2 ranks": _repeats(2, 0.02, 0.02)}, baseline="1 rank")
    assert c.rows["2 ranks"]["speedup"] == pytest.approx(2.0, rel=0.05)
    assert c.rows["2 ranks"]["efficiency"] == pytest.approx(1.0, rel=0.05)
    assert c.rows["1 rank"]["samples_per_s"]["median"] == pytest.approx(32 / 0.02, rel=0.01)
    assert c.verdicts["2 ranks"].holds and "speed-up" in str(c) and "efficiency" in str(c)
    slower = compare({"1 rank": _repeats(1, 0.02, 0.02), "2 ranks": _repeats(2, 0.05, 0.02)})
    assert slower.verdicts["2 ranks"].fails and slower.rows["2 ranks"]["efficiency"] == pytest.approx(0.4, rel=0.05)


def test_compare_sets_optimizer_steps_side_by_side_not_micro_steps():
    c = compare({"plain": _repeats(2, 0.02, 0.01), "accumulating": _repeats(2, 0.02, 0.01, micro=4)})
    plain, acc = c.rows["plain"]["step"]["median"], c.rows["accumulating"]["step"]["median"]
    assert acc == pytest.approx(plain, rel=0.05)          # 4 micro-steps of 5 ms: one 20 ms optimizer step
    assert c.rows["accumulating"]["samples_per_s"]["median"] == pytest.approx(4 * 2 * 32 / 0.02, rel=0.05)


def test_compare_says_a_difference_inside_the_spread_is_not_resolvable():
    c = compare({"a": _repeats(2, 0.020, 0.2), "b": _repeats(2, 0.021, 0.2)})
    assert not c.verdicts["b"].resolved
    few = compare({"a": _repeats(2, 0.02, 0.01, k=2), "b": _repeats(2, 0.04, 0.01, k=2)})
    assert not few.verdicts["b"].resolved and "repeats" in few.verdicts["b"].rule


def test_compare_refuses_one_run_and_an_unknown_baseline_and_plots():
    with pytest.raises(ValueError, match="two or more"):
        compare({"a": _repeats(2, 0.02, 0.01)})
    with pytest.raises(ValueError, match="baseline"):
        compare({"a": _repeats(2, 0.02, 0.01), "b": _repeats(2, 0.02, 0.01)}, baseline="c")
    c = compare({"a": _repeats(2, 0.02, 0.01), "b": _repeats(2, 0.03, 0.01)})
    assert plots.comparison(c).axes


def test_compare_paired_refuses_unequal_repeats():
    a, b = _repeats(1, 0.02, 0.01, k=5), _repeats(1, 0.03, 0.01, k=4)
    with pytest.raises(ValueError, match="same number of repeats: got 'a' 5, 'b' 4"):
        compare({"a": a, "b": b}, paired=True)
    assert compare({"a": a, "b": _repeats(1, 0.03, 0.01)}, paired=True).verdicts["b"].fails


def test_compare_prints_every_magnitude_in_its_own_column():
    c = compare({"1 rank": _repeats(1, 41.27, 0.01), "2 ranks": _repeats(2, 0.00021, 0.01)})
    text = str(c).split("\nsamples/s:")[0]
    assert "e+" not in text and "e-" not in text and "41.3 s" in text and "210 us" in text
    header, first, second = text.splitlines()[:3]
    assert len(first) == len(second) == len(header)


# -- real runs -----------------------------------------------------------------

@pytest.mark.slow
def test_known_sleeps_are_accounted_for_on_two_ranks():
    for r in launch(dw.sleepy, world_size=2):
        t, a = r["timer"], r["timer"]["account"]
        assert a["wall"] == pytest.approx(r["wall"], rel=0.05)  # the worker's own clock, same window
        assert a["outside"]["eval"] == pytest.approx(0.4, rel=0.25)
        assert a["before_first_step"] >= 0.1
        assert max(s["step_time"] for s in t["steps"]) < 0.2  # no evaluation inside a step
        assert (t["world_size"], t["batch_size"], t["start_method"]) == (2, 8, default_start_method())
        assert all(s["optimizer_steps"] == 1 and s["sync"] for s in t["steps"])   # torch's hooks saw them
        waits = sorted(s["wait"] for s in t["steps"][2:])
        median_wait = waits[len(waits) // 2]
        if t["rank"] == 0:  # rank 1 sleeps 30 ms more per step: rank 0 waits for it
            assert median_wait == pytest.approx(0.03, abs=0.012)
        else:
            assert median_wait < 0.005


@pytest.mark.slow
def test_duplicated_evaluation_ranks_first_on_a_real_run():
    import torch._dynamo  # noqa: F401 - forked workers inherit it: start-up stays below the evaluation
    out = launch(dw.duplicated_eval, world_size=2, start_method="fork", kwargs=dict(test_size=90000))
    d = diagnose(out)
    assert d.findings[0].cause == OUTSIDE and d.findings[0].what == "eval", str(d)
    for r in out:
        a = r["account"]
        named = a["steps"] + sum(a["outside"].values())
        gaps = a["before_first_step"] + a["between_steps"] + a["after_last_step"]
        assert named + gaps == pytest.approx(a["wall"], abs=1e-6)  # the parts cover the rank's wall


@pytest.mark.slow
def test_accumulation_is_told_apart_by_the_timer_on_a_real_run():
    without = diagnose(launch(dw.accumulating, (False,), world_size=2))
    assert ACCUMULATION in without.causes, str(without)
    acc = without.finding(ACCUMULATION)
    assert "18 micro-steps" in acc.detail and "4 all-reduces per optimizer step" in acc.detail
    right = diagnose(launch(dw.accumulating, (True,), world_size=2))
    assert ACCUMULATION not in right.causes and any("accumulation: 4 micro-steps" in c for c in right.confirmations)
    # the optimizer timed as a step of its own, after the micro-step closed: still the same step
    late = launch(dw.accumulating, (True,), kwargs=dict(optimizer_apart=True), world_size=2)
    assert ACCUMULATION not in diagnose(late).causes
    assert sum(s["optimizer_steps"] for s in late[0]["timer"]["steps"]) == 6 and len(late[0]["timer"]["steps"]) == 24


def test_on_shared_cores_a_slower_backward_is_not_uneven_work_but_a_slower_forward_is():
    # gloo's all-reduce threads run beside the backward on shared cores: a slower backward there is contention
    backward = diagnose(simulate(bwd=[0.02, 0.03], threads=1, cores=2))
    assert WAITING not in backward.causes, str(backward)
    forward = diagnose(simulate(forward=[0.02, 0.03], threads=1, cores=2))
    assert WAITING in forward.causes and "'forward'" in forward.finding(WAITING).change
    assert WAITING in diagnose(simulate(bwd=[0.02, 0.03], threads=1, cores=8)).causes   # cores to spare


def test_accumulation_below_the_floor_is_a_note_and_on_shared_cores_counts_its_whole_all_reduce():
    tiny = diagnose(simulate(micro=4, no_sync=False, transfer=0.0002, threads=1, cores=8))
    assert ACCUMULATION not in tiny.causes
    assert any("without no_sync: 4 all-reduces per optimizer step" in n for n in tiny.notes), tiny.notes
    shared = diagnose(simulate(micro=4, no_sync=False, transfer=0.0002, threads=1, cores=2, allreduce=0.01))
    f = shared.finding(ACCUMULATION)
    assert f is not None and f.status == "suspected" and "shared cores" in f.detail


def test_under_accumulation_the_all_reduce_is_read_per_synced_step_and_not_advised_again():
    # the no_sync micro-steps all-reduce nothing: their 0 is not the all-reduce's time per step, and a run
    # that accumulates already is not told to accumulate
    acc = diagnose(simulate(micro=4, transfer=0.03)).finding(EXPOSED)
    assert "all-reduce 30 ms" in acc.detail and "accumulation" not in acc.change, str(acc)
    plain = diagnose(simulate(transfer=0.03)).finding(EXPOSED)
    assert "accumulation with no_sync" in plain.change


SUMS = {  # runs where several causes meet, estimates among them
    "every cause": simulate(world=3, data=0.01, forward=[0.02, 0.03, 0.02], transfer=0.01, between=0.2, micro=2,
                            no_sync=False, buckets=SMALL, outside=[(0, 5, "eval", 0.5)], threads=2, cores=2,
                            collectives=0.002),
    "small buckets, shared cores": simulate(buckets=SMALL, threads=1, cores=2, transfer=0.001),
    "accumulation on shared cores": simulate(micro=4, no_sync=False, threads=1, cores=2, allreduce=0.05),
    "threads over the cores": simulate(threads=4, cores=2, forward=lambda r, k: 0.02 + 0.01 * ((r + k) % 2)),
    "host-bound with a data stall": gpu(0.95, busy=0.1, data=0.004),
    "slower rank and evaluation": simulate(forward=[0.02, 0.04], outside=[(1, 9, "eval", 1.0)], data=0.005),
}


@pytest.mark.parametrize("name", list(SUMS))
def test_the_findings_seconds_never_sum_past_a_ranks_window(name):
    """Each second of a rank's window charged once, estimates (suspected) included."""
    from ddp_lessons.tool.diagnosis.measures import measures
    run = Run(SUMS[name])
    d = diagnose(run)
    assert d.findings, str(d)
    for i, r in enumerate(run):
        charged = sum(f.per_rank[i] or 0.0 for f in d.findings)
        assert charged <= measures(r).window * (1 + 1e-9), (name, i, str(d))


def test_an_estimate_past_the_window_is_cut_to_what_the_measured_findings_left():
    """A fixed cost per call priced too high (a link's latency of 50 ms) makes the small-bucket estimate
    22 s on a 1 s window: cut to what the data wait (measured) left."""
    from ddp_lessons.tool.diagnosis.measures import measures
    run = Run(simulate(buckets=SMALL, data=0.01))
    d = diagnose(run, link={"latency": 0.05})
    small, data = d.finding(SMALL_BUCKETS), d.finding(DATA)
    window = measures(run[0]).window
    assert small.status == "suspected" and data.status == "measured"
    assert small.seconds + data.seconds == pytest.approx(window, rel=1e-6) and small.window_share < 1


def test_the_gpu_records_findings_sum_within_its_window():
    """On the recorded H200 run the findings once summed to 115% of the window (host-bound charged the data
    wait again)."""
    d = diagnose(Run.load("own-run-h200x1", setup="broken"))
    assert sum(f.window_share for f in d.findings) <= 1.0 + 1e-9, str(d)
