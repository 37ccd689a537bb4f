"""`diagnose` and `compare`: every finding from a hand-made run that must
produce it and one that must not; a real 2-rank run with duplicated
evaluation; runs compared with their spread."""

import _diag_workers as dw
import pytest

from ddp_lessons.tool.launcher.checks import default_start_method

from ddp_lessons import compare, diagnose, launch
from ddp_lessons.tool import plots
from ddp_lessons.tool.diagnosis import CAUSES
from ddp_lessons.tool.diagnosis.causes import (ACCUMULATION, DATA, EXPOSED, HOST, LAST_BUCKET, LATENCY, OUTSIDE,
                                              STARTUP, WAITING)
from ddp_lessons.tool.timing.account import account


def fake(rank=0, world=2, n=20, forward=0.02, bwd=0.02, opt=0.005, data=0.0, wait=0.0, exposed=0.0,
         allreduce=0.004, calls=2, nbytes=16 << 20, outside=None, startup=0.1, before=0.01, between=0.0,
         after=0.0, device="cpu", batch=32, comm="hook"):
    """One rank's timer result, made by hand: `n` equal steps, then the outside work."""
    exposed = max(exposed, wait)
    step_time = data + forward + bwd + exposed + opt
    steps, t = [], before
    for i in range(n):
        ph = {"forward": (data, data + forward), "backward": (data + forward, data + forward + bwd + exposed),
              "optimizer": (step_time - opt, step_time)}
        steps.append({"step": i, "t_start": t, "step_time": step_time, "data": data, "phases": ph,
                      "buckets": [], "forward": forward, "backward": bwd + exposed, "optimizer": opt,
                      "backward_compute": bwd, "exposed": exposed, "wait": wait, "allreduce": allreduce,
                      "allreduce_calls": calls, "allreduce_bytes": nbytes})
        t += step_time + between / n
    out_iv = []
    for name, secs in (outside or {}).items():
        out_iv.append({"name": name, "start": t, "end": t + secs})
        t += secs
    return {"rank": rank, "world_size": world, "backend": "gloo", "device": device, "batch_size": batch,
            "comm_source": comm, "steps": steps, "outside": out_iv, "clock": {"error": 0.0},
            "account": account(t + after, steps, out_iv, startup)}


def run(world=2, **per_rank):
    """A run of `world` ranks; a keyword given as a list is per rank."""
    return [fake(r, world, **{k: v[r] if isinstance(v, list) else v for k, v in per_rank.items()})
            for r in range(world)]


def accumulated(k=4, no_sync=False, **kw):
    """A run whose optimizer steps every k-th step: micro-steps before it all-reduce (no_sync: they do not)."""
    ranks = run(exposed=0.02, **kw)
    for r in ranks:
        for s in r["steps"]:
            if s["step"] % k != k - 1:
                del s["phases"]["optimizer"]
                s["optimizer"] = 0.0
                if no_sync:
                    s.update(allreduce_calls=0, allreduce_bytes=0, exposed=0.0, wait=0.0)
    return ranks


def bucketed(last_alone=True, **kw):
    """Three buckets a step, 8 MiB each (the last 32 MiB) and 20 ms exposed. last_alone: the two
    earlier buckets were sent during the backward and only the last one is exposed; else the earlier
    ones are still being sent when the last is ready, and it queues behind them."""
    ranks = run(exposed=0.02, **kw)
    for r in ranks:
        for s in r["steps"]:
            f0, f1 = s["phases"]["forward"][1], s["phases"]["backward"][1] - 0.02  # backward compute's end
            early_end = (f0 + 0.006, f0 + 0.012) if last_alone else (f1 + 0.017, f1 + 0.018)
            s["buckets"] = [{"index": 0, "start": f0 + 0.003, "end": early_end[0], "bytes": 8 << 20},
                            {"index": 1, "start": f0 + 0.008, "end": early_end[1], "bytes": 8 << 20},
                            {"index": 2, "start": f1, "end": f1 + 0.02, "bytes": 32 << 20}]
    return ranks


CASES = {  # cause: (a run that must produce it, one that must not)
    OUTSIDE: (run(outside={"eval": 2.0}), run(outside={"eval": 0.01})),
    WAITING: (run(wait=[0.03, 0.0]), run(wait=0.0)),
    EXPOSED: (run(exposed=0.02), run(exposed=0.0)),
    LATENCY: (run(exposed=0.02, allreduce=0.02, forward=0.001, bwd=0.001, opt=0.001, nbytes=128 << 10),
              run(exposed=0.02, allreduce=0.02, forward=0.001, bwd=0.001, opt=0.001, nbytes=64 << 20)),
    DATA: (run(data=0.02), run(data=0.0)),
    HOST: (run(between=0.5), run(between=0.0)),
    STARTUP: (run(startup=3.0), run(startup=0.01)),
    ACCUMULATION: (accumulated(), accumulated(no_sync=True)),
    LAST_BUCKET: (bucketed(), bucketed(last_alone=False)),
}


@pytest.mark.parametrize("cause", list(CASES))
def test_each_finding_appears_when_its_numbers_say_so_and_only_then(cause):
    yes, no = CASES[cause]
    assert cause in diagnose(yes).causes
    assert cause not in diagnose(no).causes


def test_outside_work_on_a_single_rank_is_not_called_uneven():
    (one,) = diagnose(run(world=1, outside={"eval": 2.0})).findings[:1]
    assert one.cause == OUTSIDE and "only rank" in one.detail and "wait" not in one.detail
    two = diagnose(run(outside=[{"eval": 2.0}, {"eval": 0.01}])).findings[0]
    assert two.cause == OUTSIDE and "the others wait for it" in two.detail


def _evaluation_on_rank_0_while_rank_1_waits(waited: float):
    """Rank 0 evaluates for 2 s after its steps; rank 1's next step waits `waited` s in its all-reduce."""
    r0 = fake(0, n=10, outside={"eval": 2.0})
    r0["outside"].append({"name": "eval", "start": 100.0, "end": 101.0})   # a later one, overlapping nothing
    r1 = fake(1, n=11)
    s = r1["steps"][-1]
    s.update(t_start=r0["outside"][0]["start"], wait=waited, exposed=waited, step_time=s["step_time"] + waited)
    wall = s["t_start"] + s["step_time"]
    r1["account"] = account(wall, r1["steps"], [], 0.1)
    return [r0, r1]


def test_a_peers_outside_work_is_charged_once_to_that_work():
    d = diagnose(_evaluation_on_rank_0_while_rank_1_waits(1.9))
    assert WAITING not in d.causes                  # rank 1's 1.9 s wait is the evaluation's, not a slow rank's
    ev = d.findings[d.causes.index(OUTSIDE)]
    assert ev.per_rank == pytest.approx([2.0, 1.9]) and "others' waits" in ev.detail
    # the same wait without a peer's outside work beside it stays a wait
    r0, r1 = _evaluation_on_rank_0_while_rank_1_waits(1.9)
    r0["outside"] = []
    r0["account"] = account(r0["steps"][-1]["t_start"] + 3.0, r0["steps"], [], 0.1)
    assert WAITING in diagnose([r0, r1]).causes


def test_accumulation_without_no_sync_is_named_with_its_count_and_not_also_as_exposed():
    d = diagnose(accumulated(k=4))
    acc = d.findings[d.causes.index(ACCUMULATION)]
    assert "15 micro-steps" in acc.detail and "4 all-reduces per optimizer step" in acc.detail
    # the micro-steps' exposed all-reduce is charged once: what is left as exposed is the optimizer steps'
    exp = d.findings[d.causes.index(EXPOSED)]
    assert exp.seconds == pytest.approx(5 * 0.02) and acc.seconds == pytest.approx(15 * 0.02)


def test_the_vocabulary_is_complete_and_each_finding_says_what_to_do():
    assert set(CASES) == set(CAUSES)
    f = diagnose(run(outside={"eval": 2.0}, data=0.02)).findings[0]
    assert f.change and f.check and len(f.per_rank) == 2 and 0 < f.share <= 1


def test_findings_are_ranked_by_the_seconds_they_cost():
    d = diagnose(run(outside={"eval": 0.5}, data=0.05, startup=0.3))
    assert d.causes == [DATA, OUTSIDE, STARTUP]  # 1.0 s, 0.5 s, 0.31 s
    assert [f.seconds for f in d.findings] == sorted((f.seconds for f in d.findings), reverse=True)


def test_even_outside_work_reads_as_done_on_every_rank_uneven_as_making_others_wait():
    assert "done 2 times" in diagnose(run(outside={"eval": 2.0})).findings[0].detail
    assert "the others wait" in diagnose(run(outside=[{"eval": 2.0}, {"eval": 0.1}])).findings[0].detail


def test_the_slower_rank_is_named_with_the_part_where_it_spends_more():
    d = diagnose(run(wait=[0.03, 0.0], forward=[0.02, 0.05]))
    (w,) = [f for f in d.findings if f.cause == WAITING]
    assert "rank 1 is the slowest" in w.detail and "'forward'" in w.detail


def test_what_cannot_be_decided_is_said():
    assert any("not timed" in u for u in diagnose(run(comm="none")).undecided)
    assert any("only 1 of 2" in u for u in diagnose(run()[:1]).undecided)
    gpu = diagnose(run(device="cuda:0", forward=0.001, bwd=0.001, opt=0.0005))
    assert any("CUDA" in u for u in gpu.undecided)
    assert not any("CUDA" in u for u in diagnose(run(device="cuda:0")).undecided)  # 45 ms steps
    old = run()
    for r in old:
        del r["account"]
    assert any("no account" in u for u in diagnose(old).undecided)
    assert not diagnose(run()).undecided


def test_inputs_launch_results_dicts_holding_them_and_records():
    ranks = run(outside={"eval": 2.0})
    assert diagnose([{"timer": r, "loss": 0.1} for r in ranks]).causes[0] == OUTSIDE
    assert diagnose([{"timer": r} for r in ranks]).causes[0] == OUTSIDE
    assert diagnose({"schema": "ddp-lessons/run", "results": ranks}).causes[0] == OUTSIDE
    with pytest.raises(ValueError, match="timer result") as info:
        diagnose([{"loss": 0.1}])
    assert "\n" not in str(info.value)


def test_it_prints_as_a_short_table():
    d = diagnose(run(outside={"eval": 2.0}))
    text = str(d)
    assert text.splitlines()[1].startswith(" 1. work outside the steps: eval")
    assert "<table>" in d._repr_html_() and d.table()[0][1] == "work outside the steps: eval"


# -- compare -------------------------------------------------------------------

def _repeats(world, step, jitter, k=5):
    return [run(world, forward=step * (1 + jitter * (i - 2)), bwd=0.0, opt=0.0) for i in range(k)]


def test_compare_gives_throughput_scaling_and_a_verdict_outside_the_noise():
    c = compare({"1 rank": _repeats(1, 0.02, 0.02), "2 ranks": _repeats(2, 0.02, 0.02)}, baseline="1 rank")
    assert c.rows["2 ranks"]["scaling"] == pytest.approx(2.0, rel=0.05)
    assert c.rows["1 rank"]["samples_per_s"]["median"] == pytest.approx(32 / 0.02, rel=0.01)
    assert c.verdicts["2 ranks"].holds
    slower = compare({"1 rank": _repeats(1, 0.02, 0.02), "2 ranks": _repeats(2, 0.05, 0.02)})
    assert slower.verdicts["2 ranks"].fails


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
    assert "scaling" in str(c) and plots.comparison(c).axes


def test_compare_paired_refuses_unequal_repeats_and_keeps_a_failed_round_in_place():
    a, b = _repeats(1, 0.02, 0.01, k=5), _repeats(1, 0.03, 0.01, k=4)
    with pytest.raises(ValueError, match="same number of repeats: got 'a' 5, 'b' 4"):
        compare({"a": a, "b": b}, paired=True)
    # b is slower in every round; a round b lost (no throughput) must not shift the pairing
    b = _repeats(1, 0.03, 0.01, k=5)
    c = compare({"a": a, "b": b}, paired=True)
    assert c.verdicts["b"].fails


def test_compare_prints_every_magnitude_in_its_own_column():
    c = compare({"1 rank": _repeats(1, 41.27, 0.01), "2 ranks": _repeats(2, 0.00021, 0.01)})
    text = str(c).split("\nsamples/s:")[0]   # the table, above its legend and the verdicts
    assert "e+" not in text and "e-" not in text
    assert "41.3 s" in text and "210 us" in text
    header, first, second = text.splitlines()[:3]
    assert len(first) == len(second) == len(header)   # the columns line up
    assert "  " in first.split("41.3 s")[0]           # and never run into each other


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
        waits = sorted(s["wait"] for s in t["steps"][2:])
        median_wait = waits[len(waits) // 2]
        if t["rank"] == 0:  # rank 1 sleeps 30 ms more per step: rank 0 waits for it
            assert median_wait == pytest.approx(0.03, abs=0.012)
        else:
            assert median_wait < 0.005


@pytest.mark.slow
def test_duplicated_evaluation_ranks_first_on_a_real_run():
    # DDP's constructor imports torch._dynamo (seconds here); forked workers inherit this
    # process's imports, so start-up stays below the evaluation this test is about.
    import torch._dynamo  # noqa: F401
    # Three evaluations of 90,000 rows (about 2.5 s here) against a start-up of about 0.9 s: eval leads by
    # a margin a loaded machine keeps (a third of that, 30,000 rows, tied with start-up on a clean clone).
    out = launch(dw.duplicated_eval, world_size=2, start_method="fork", kwargs=dict(test_size=90000))
    d = diagnose(out)
    assert d.findings[0].cause == OUTSIDE and d.findings[0].what == "eval", str(d)
    tails = []
    for r in out:
        a = r["account"]
        named = a["steps"] + sum(a["outside"].values())
        gaps = a["before_first_step"] + a["between_steps"] + a["after_last_step"]
        assert named + gaps == pytest.approx(a["wall"], abs=1e-6)  # the parts cover the rank's wall
        tails.append(a["after_last_step"] / a["wall"])
    # The window ends at a barrier: a rank that finishes first waits there for the other, so only
    # the last rank to arrive has a short tail (the run's timing, a margin load keeps).
    assert min(tails) < 0.05, tails


@pytest.mark.slow
def test_accumulation_without_no_sync_is_named_on_a_real_run_and_not_with_it():
    without = diagnose(launch(dw.accumulating, (False,), world_size=2))
    assert ACCUMULATION in without.causes, str(without)
    acc = without.findings[without.causes.index(ACCUMULATION)]
    assert "18 micro-steps" in acc.detail and "4 all-reduces per optimizer step" in acc.detail
    assert ACCUMULATION not in diagnose(launch(dw.accumulating, (True,), world_size=2)).causes



def test_the_last_bucket_is_charged_instead_of_the_exposed_all_reduce_and_says_its_bytes():
    d = diagnose(bucketed())
    lb = d.findings[d.causes.index(LAST_BUCKET)]
    assert EXPOSED not in d.causes and "32 of the 48 MiB in 3 bucket(s)" in lb.detail
    assert lb.seconds == pytest.approx(18 * 0.02)   # the steps after DDP's 2 warm-up steps
    assert "cannot help" in lb.change
    queued = diagnose(bucketed(last_alone=False))
    assert EXPOSED in queued.causes and LAST_BUCKET not in queued.causes


def test_a_single_bucket_is_not_called_the_last_bucket():
    ranks = bucketed()
    for r in ranks:
        for s in r["steps"]:
            s["buckets"] = s["buckets"][-1:]
    assert LAST_BUCKET not in diagnose(ranks).causes


def test_scores_put_each_rank_against_the_fastest_per_phase():
    d = diagnose(run(forward=[0.02, 0.03]))
    assert d.scores["forward"] == pytest.approx([1.0, 2 / 3])
    assert d.scores["backward_compute"] == pytest.approx([1.0, 1.0])
    assert "forward 1.00, 0.67" in str(d)
    assert diagnose(run(world=1)).scores == {}


def test_projection_scales_recurring_costs_and_keeps_start_up_once():
    ranks = run(data=0.02, startup=5.0)   # 20 steps: 0.4 s of data wait against 5 s of start-up
    for r in ranks:
        r["data_passes"] = 2
    assert diagnose(ranks).causes[0] == STARTUP
    d = diagnose(ranks, epochs=200)       # 100x the run: 40 s of data wait, start-up still 5 s
    assert d.causes[0] == DATA and d.findings[0].seconds == pytest.approx(40.0)
    start = d.findings[d.causes.index(STARTUP)]
    assert start.seconds == pytest.approx(5.0 + 0.01) and "once per launch" in start.label
    assert any("projected to 200 epochs from the 2 measured" in n for n in d.notes)
    with pytest.raises(ValueError, match="diagnose without epochs="):
        diagnose(run(), epochs=10)        # no data_passes: nothing to scale from


def test_ranks_sharing_cores_get_a_note_and_ranks_that_fit_do_not():
    ranks = run(wait=[0.03, 0.0])
    for r in ranks:
        r.update(host="box", threads=2, cores=2)
    assert any("share cores" in n for n in diagnose(ranks).notes)
    for r in ranks:
        r["threads"] = 1
    assert not any("share cores" in n for n in diagnose(ranks).notes)


def test_light_mode_without_ddp_timings_names_what_is_missing():
    ranks = run(wait=[0.03, 0.0], comm="flight_recorder")
    for r in ranks:
        r["mode"] = "light"
        for s in r["steps"]:
            for k in ("exposed", "wait"):
                s.pop(k)
    d = diagnose(ranks)
    assert WAITING not in d.causes and EXPOSED not in d.causes
    line = next(u for u in d.undecided if u.startswith("exposed all-reduce and waiting"))
    assert "read flight_recorder only" in line and "no common clock" not in " ".join(d.undecided)


def test_sampled_ddp_timings_are_scaled_to_every_step():
    ranks = run(exposed=0.02)
    for r in ranks:
        r["ddp_logging"] = {"sample_every": 10}
        for s in r["steps"]:
            if s["step"] >= 10 and s["step"] % 10:
                s.pop("exposed"); s.pop("wait")  # noqa: E702 - DDP recorded steps 0-9 and every 10th
    f = diagnose(ranks).findings[0]
    assert f.cause == EXPOSED and f.seconds == pytest.approx(20 * 0.02)


def test_on_a_gpu_data_loading_is_charged_by_what_the_device_waited():
    ranks = run(data=0.02, device="cuda:0")
    for r in ranks:
        for s in r["steps"]:
            s["data_stall"] = 0.0        # the host waited, but the device still had queued work
    assert DATA not in diagnose(ranks).causes
    for r in ranks:
        for s in r["steps"]:
            s["data_stall"] = 0.02
    assert DATA in diagnose(ranks).causes


def test_projection_keeps_the_loaders_start_once_when_later_epochs_do_not_pay_it_again():
    ranks = run(data=0.01, startup=0.5)
    for r in ranks:
        r["data_passes"], r["pass_starts"] = 2, [0, 10]
        r["steps"][0]["data"] = 0.4          # workers starting in the first step, persistent after
    once = diagnose(ranks, epochs=200).findings
    data = next(f for f in once if f.cause == DATA)
    # 0.59 s measured, of which 0.39 s once (the first step beyond a later epoch's first): 0.39 + 0.2 x 100
    assert data.seconds == pytest.approx(0.39 + 0.2 * 100)
    for r in ranks:
        r["steps"][10]["data"] = 0.4         # started again in every epoch: recurring
    again = next(f for f in diagnose(ranks, epochs=200).findings if f.cause == DATA)
    assert again.seconds == pytest.approx((0.4 + 0.4 + 18 * 0.01) * 100)


def test_the_planted_workload_has_the_shape_its_causes_need():
    from ddp_lessons.course.planted import MICRO, planted
    out = launch(planted, ("all", 2), world_size=2, threads=1)
    for r in out:
        steps = r["steps"]
        assert len(steps) == 2 * MICRO
        with_opt = [s["step"] for s in steps if "optimizer" in s["phases"]]
        assert with_opt == [MICRO - 1, 2 * MICRO - 1]       # micro-steps in between, all all-reducing
        assert all(s["allreduce_calls"] >= 1 for s in steps)
        assert len(steps[-1]["buckets"]) >= 2                # the embedding's bucket and the rest
    assert [o["name"] for o in out[0]["outside"]] == ["checkpoint"] * 2 and out[1]["outside"] == []
    with pytest.raises(Exception, match="variant"):
        planted("none")
