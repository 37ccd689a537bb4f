"""The per-step timer: counts and bytes exactly, times cross-checked."""

import statistics

import _timing_workers as w
import pytest
import torch

from ddp_lessons.tool import hooks
from ddp_lessons import launch
from ddp_lessons.cases.intro import workers as toy
import _benchmarks  # noqa: F401 - puts benchmarks/ on the path
from benchlib.timer_agree import kernels_against_timer
from ddp_lessons.course.timer_validation.check import summarize_run, validation_summary
from ddp_lessons.tool.runs import Rank, Run
from ddp_lessons.tool.timing import StepTimer
from ddp_lessons.tool.timing.clocks import EventRing
from ddp_lessons.tool.timing.comm import _comm_numbers
from ddp_lessons.tool.diagnosis.measures import measures
from ddp_lessons.tool.timing.light import FlightRecorderSource


def _median(rank_times, key, skip=2):
    return statistics.median(s[key] for s in rank_times["steps"][skip:])


def test_counts_and_bytes_per_step_are_exact():
    # 1 MB buckets on a ~3.2 MB model: DDP makes several buckets after step 0.
    out = launch(toy.train_mlp, (8, 512, 4, 16, 1.0), world_size=2)
    for rank in out:
        steps = rank["steps"]
        assert len(steps) == 8
        assert steps[0]["allreduce_calls"] == 1  # the first step has one big bucket
        assert all(s["allreduce_calls"] > 1 for s in steps[2:])
        # Every gradient byte is all-reduced once per step.
        assert {s["allreduce_bytes"] for s in steps} == {rank["grad_bytes"]}
        assert all(0 <= s["exposed"] <= s["backward"] + 1e-6 for s in steps)


def test_a_known_delay_moves_the_measured_allreduce_by_that_much():
    delay = 0.05
    base = launch(toy.train_mlp, (8, 256, 2, 16, 25.0), world_size=2)
    slow = launch(toy.train_mlp, (8, 256, 2, 16, 25.0, True, delay), world_size=2)
    for b, s in zip(base, slow, strict=True):
        calls = _median(s, "allreduce_calls")
        moved = _median(s, "allreduce") - _median(b, "allreduce")
        assert moved == pytest.approx(delay * calls, rel=0.3)
        # The backward pass cannot hide a delay added after the last bucket.
        assert _median(s, "exposed") - _median(b, "exposed") == pytest.approx(delay, rel=0.3)


def test_agrees_with_ddps_own_logging():
    # A 20 ms delay makes communication dominate, so noise stays small next to it.
    out = launch(toy.train_mlp, (10, 256, 2, 16, 25.0, True, 0.02, None, True), world_size=2)
    for rank in out:
        ours = [s["exposed"] for s in rank["steps"][2:9]]
        ddp = [d["exposed"] for d in rank["ddp_logging"][2:9]]  # entry i describes step i
        assert statistics.median(ours) == pytest.approx(statistics.median(ddp), rel=0.25, abs=0.003)


@pytest.mark.parametrize("timed", [False, True])
def test_compression_sends_half_the_bytes_whether_timed_or_not(timed):
    out = launch(w.count_sent_bytes, (timed, torch.float16), world_size=2)
    for rank in out:
        # Counted at dist.all_reduce, not by the timer: every step, every gradient, in fp16.
        assert rank["sent_dtypes"] == ["torch.float16"]
        assert rank["sent_bytes"] == rank["n_steps"] * rank["grad_bytes"] // 2
        assert rank["comm_hook"] == ("timed_comm_hook" if timed else "allreduce_hook_in_fp16")
        if timed:  # and the timer reports what was sent
            assert {s["allreduce_bytes"] for s in rank["steps"]} == {rank["grad_bytes"] // 2}
            assert all(b["grad_bytes"] == 2 * b["bytes"] for s in rank["steps"] for b in s["buckets"])
        else:
            assert rank["steps"] == []


def test_disabled_timer_records_nothing_and_registers_no_hook():
    out = launch(toy.train_mlp, (4, 64, 1, 8, 25.0, False), world_size=2)
    assert all(r["steps"] == [] and not r["comm_hook"] for r in out)


@pytest.mark.parametrize("timed", [False, True])
def test_the_users_own_hook_is_wrapped_and_its_result_used(timed):
    for rank in launch(w.own_hook, (timed,), world_size=2):
        assert rank["calls"] > 3 and not rank["changed"]  # a few buckets per step; zeros applied
        if timed:
            assert rank["timed_buckets"] == rank["calls"] and rank["comm_hook"] == "timed_comm_hook"
        else:
            assert rank["comm_hook"].endswith("_zeroing_hook")


def test_a_model_that_already_has_a_hook_says_to_pass_it_to_the_timer():
    msg = launch(w.hook_already_registered, world_size=1)[0]
    assert "hook=" in msg and "\n" not in msg


def test_a_hook_registered_after_the_timer_is_refused_with_what_to_do():
    msg = launch(w.hook_after_timer, world_size=1)[0]
    assert msg and "StepTimer already registered" in msg and "hook=your_hook" in msg and "\n" not in msg


def test_compression_hook_names():
    assert hooks.compression_hook(None) is None and hooks.compression_hook("none") is None
    assert hooks.compression_hook("bf16").__name__ == "allreduce_hook_in_bf16"
    assert hooks.compression_hook(torch.float16).__name__ == "allreduce_hook_in_fp16"
    assert hooks.delayed(None, 0.0) is None
    with pytest.raises(ValueError, match="fp16"):
        hooks.compression_hook("int8")


def test_single_process_timer_without_ddp():
    model = torch.nn.Linear(4, 1)
    timer = StepTimer(None)
    for _ in range(3):
        with timer.phase("forward"):
            loss = model(torch.randn(2, 4)).sum()
        with timer.phase("backward"):
            loss.backward()
        timer.step_done()
    steps = timer.result()["steps"]
    assert len(steps) == 3 and all(s["allreduce_calls"] == 0 for s in steps)
    assert all(s["step_time"] >= s["forward"] + s["backward"] for s in steps)
    assert set(Rank(timer.result()).median_step(0)) >= {"forward", "backward", "step_time"}


def test_a_phase_twice_in_one_step_is_refused_not_overwritten():
    # four micro-steps of accumulation timed as one step kept only the last forward before
    model = torch.nn.Linear(4, 1)
    timer = StepTimer(None)
    with timer.phase("forward"):
        model(torch.randn(2, 4)).sum()
    with pytest.raises(ValueError, match="'forward' entered twice in one step.*step_done"):
        with timer.phase("forward"):
            model(torch.randn(2, 4)).sum()
    timer.step_done()
    with timer.phase("forward"):   # the next step has its own
        model(torch.randn(2, 4)).sum()
    timer.step_done()
    assert [set(s["phases"]) for s in timer.result()["steps"]] == [{"forward"}, {"forward"}]


def test_busy_time_is_the_union_of_bucket_intervals():
    buckets = [{"start": 0.0, "end": 2.0, "bytes": 1}, {"start": 1.0, "end": 3.0, "bytes": 1},
               {"start": 5.0, "end": 6.0, "bytes": 2}]
    got = _comm_numbers(buckets, (0.0, 6.5))
    assert got["allreduce"] == 4.0 and got["allreduce_calls"] == 3 and got["allreduce_bytes"] == 4
    assert got["exposed"] == 1.0  # last bucket ready at 5.0, done at 6.0
    assert got["backward_compute"] == 5.5


# -- mode "light": DDP's own all-reduce, DDP's own timings -------------------

def test_light_mode_on_gloo_gives_the_same_keys_and_counts():
    light = launch(w.light_mode, (6,), world_size=2)
    full = launch(w.light_mode, (6, 0.0, True, "full"), world_size=2)
    for lr, fr in zip(light, full, strict=True):
        assert (lr["mode"], lr["comm_source"], fr["mode"], fr["comm_source"]) == (
            "light", "compute_end+ddp_logging", "full", "hook")
        assert lr["comm_hook"] == ""  # DDP's own C++ all-reduce: no Python hook registered
        assert len(lr["steps"]) == 6
        for a, b in zip(lr["steps"], fr["steps"], strict=True):
            assert set(b) - {"hook_time"} <= set(a)  # every key of mode "full" but its hook's own time
            assert a["buckets"] == []
        steps = lr["steps"]
        assert steps[0]["allreduce_calls"] == 1 and all(s["allreduce_calls"] > 1 for s in steps[2:])
        assert {s["allreduce_bytes"] for s in steps} == {lr["grad_bytes"]}
        assert all(s["allreduce"] > 0 for s in steps)  # the last step too (read at result())
        assert all(0 <= s["exposed"] <= s["backward"] + 1e-6 for s in steps)
        # the backward split at its compute's end (an autograd callback) against DDP's own timings
        gaps = sorted(abs(s["exposed"] - s["ddp_exposed"]) for s in steps[1:] if "ddp_exposed" in s)
        assert gaps and gaps[len(gaps) // 2] < 0.005, gaps


def test_light_mode_sees_a_known_delay():
    delay = 0.05
    base = launch(w.light_mode, (10,), world_size=2)
    slow = launch(w.light_mode, (10, delay), world_size=2)
    for b, s in zip(base, slow, strict=True):
        assert s["comm_hook"].endswith("delayed_hook")  # registered as it is, not wrapped
        calls = _median(s, "allreduce_calls")
        assert _median(s, "allreduce") - _median(b, "allreduce") == pytest.approx(delay * calls, rel=0.3)
        assert _median(s, "exposed") - _median(b, "exposed") >= 0.7 * delay


def test_light_mode_without_ddp_logging_still_splits_every_backward():
    """No DDP timings read (a GPU's default: reading them makes DDP wait on its events): the compute end's
    mark splits each backward; calls and bytes come from DDP's buckets."""
    rank = launch(w.light_mode, (3, 0.0, False), world_size=1)[0]
    assert rank["comm_source"] == "compute_end" and "ddp_logging" not in rank
    for s in rank["steps"]:
        assert 0 <= s["computed"] <= s["phases"]["backward"][1] + 1e-9 and "ddp_exposed" not in s
        assert s["allreduce_calls"] >= 1 and s["allreduce_bytes"] == rank["grad_bytes"]
        assert s["backward_compute"] + s["exposed"] == pytest.approx(s["backward"])


def test_compute_end_is_marked_when_the_hooked_parameter_goes_unused():
    """The compute end's hook sits, once, on the last parameter's gradient accumulator; a step that leaves
    that parameter unused never reaches it, and from the next armed step on each backward is hooked itself:
    only the step that missed goes without its mark."""
    rank = launch(w.light_unused_last, (6, 3), world_size=1)[0]
    marked = ["computed" in s for s in rank["steps"]]
    assert marked == [True, True, True, False, True, True], marked
    assert rank["per_step"] is True
    whole = launch(w.light_unused_last, (4, 99), world_size=1)[0]
    assert all("computed" in s for s in whole["steps"]) and whole["per_step"] is False


@pytest.mark.parametrize("ddp_logging", [False, 10])
def test_a_slower_rank_is_named_in_light_mode_from_every_step(ddp_logging):
    """Mode "light" is a GPU's: waits come from each step's compute end (an autograd callback), every step.
    When they came from DDP's timings read every 10th step, a rank 20 ms slower every step was charged
    about a tenth of its waits and the diagnosis said the ranks kept pace."""
    from ddp_lessons import diagnose
    from ddp_lessons.tool.diagnosis.causes import WAITING
    ranks = launch(w.light_straggler, (30, 0.02, ddp_logging), world_size=2)
    assert all("wait" in s for r in ranks for s in r["steps"])
    d = diagnose(ranks)
    f = d.finding(WAITING)
    assert f is not None and "rank 1 was the late one" in f.detail, str(d)
    assert f.per_rank[0] >= 0.5 * 28 * 0.02 and not any("kept pace" in c for c in d.confirmations)


def test_timer_modes_are_checked():
    with pytest.raises(ValueError, match="light"):
        StepTimer(None, mode="fast")


# -- the CUDA clock's event ring, on fake events ------------------------------

class _FakeEvent:
    now = 0.0  # ms

    def __init__(self):
        self.t = None

    def record(self):
        self.t = _FakeEvent.now

    def synchronize(self):
        assert self.t is not None, "read before it was recorded"

    def elapsed_time(self, other):
        return other.t - self.t


def test_event_ring_reuses_its_events_and_reads_every_mark_back():
    _FakeEvent.now = 0.0
    made = []

    def make():
        made.append(_FakeEvent())
        return made[-1]
    ring = EventRing(make, size=4, prime=True)
    tokens, truth = [], []
    for i in range(50):
        _FakeEvent.now = 2.5 * (i + 1) + (i % 3) * 0.1
        tokens.append(ring.mark())
        truth.append(_FakeEvent.now / 1e3)
    assert len(made) == 5  # 4 in the ring and time zero: no event made per mark
    assert ring.harvests > 5  # the ring was read while marking, half at a time
    assert ring.seconds(tokens) == pytest.approx(truth)
    assert ring.seconds(tokens[::7]) == pytest.approx(truth[::7])  # asking twice is fine


def test_event_ring_reads_nothing_while_it_has_room():
    _FakeEvent.now = 1.0
    ring = EventRing(_FakeEvent, size=64)
    for _ in range(40):
        ring.mark()
    assert ring.harvests == 0 and ring._ms == []


# -- median_step --------------------------------------------------------------

def test_median_step_takes_every_key_over_the_steps_that_have_it():
    steps = [{"step": 0, "step_time": 1.0}, {"step": 1, "step_time": 3.0, "b": 10.0},
             {"step": 2, "step_time": 2.0, "c": 5}, {"step": 3, "b": 20.0, "flag": True, "step_time": 2.0}]
    got = Rank({"steps": steps, "comm_source": "none"}).median_step(0)
    assert got == {"step_time": 2.0, "b": 15.0, "c": 5}


def test_median_step_of_a_rank_without_steps_is_empty():
    assert Rank({"steps": [], "comm_source": "none"}).median_step() == {}
    one = Rank({"steps": [{"step": 0, "step_time": 1.0}], "comm_source": "none"})
    assert one.median_step(2) == {"step_time": 1.0}  # too few: all kept


# -- the flight recorder's entries, by step ------------------------------------

class _FakeGroup:
    group_name = "7"

    def _enable_collectives_timing(self):
        pass


def _entry(t, group="7", name="nccl:all_reduce", dur=0.5, numel=100):
    return {"time_created_ns": t, "process_group": (group, "desc"), "profiling_name": name,
            "duration_ms": dur, "input_sizes": [[numel]], "input_dtypes": ["Float"]}


def test_flight_recorder_entries_go_to_the_step_they_were_created_in():
    src = FlightRecorderSource(_FakeGroup())
    t0 = src.clocks["realtime"][0]
    src.clocks["realtime"] += [t0 + 100, t0 + 200, t0 + 300]  # three steps closed
    entries = [_entry(t0 - 5), _entry(t0 + 10), _entry(t0 + 20, dur=None), _entry(t0 + 150, numel=8),
               _entry(t0 + 160, group="0"), _entry(t0 + 170, name="nccl:broadcast"), _entry(t0 + 400)]
    by_step = src._by_step(src._ours(entries))
    assert src.info["group_matched"] and src.info["clock"] == "realtime"
    assert sorted(by_step) == [0, 1]
    assert [b["duration"] for b in by_step[0]] == [0.0005, None]
    assert by_step[1] == [{"index": 0, "duration": 0.0005, "bytes": 32}]


def _light_steps(n):
    return [{"step": i, "backward": 0.01, "allreduce": 0.0, "exposed": 0.0, "allreduce_calls": 0,
             "allreduce_bytes": 0} for i in range(n)]


def test_a_light_nccl_result_takes_recorder_durations_only_at_sizes_they_agree_and_names_a_dropped_ring():
    from ddp_lessons.tool.timing.comm import light_numbers
    from ddp_lessons.tool.timing.light import TRUSTED_BYTES
    src = FlightRecorderSource(_FakeGroup())
    t0 = src.clocks["realtime"][0]
    src.clocks["realtime"] += [t0 + 100, t0 + 200, t0 + 300]
    big = TRUSTED_BYTES // 4  # float32 elements
    # the ring no longer holds step 0; step 1 sent 4 bytes x 100, step 2 one 256 MiB bucket
    src.collect = lambda sync=None: src._by_step(src._ours([_entry(t0 + 150), _entry(t0 + 250, numel=big)]))
    steps = _light_steps(3)
    assert light_numbers(steps, None, src, torch.device("cpu")) == "flight_recorder"
    assert src.info["steps_dropped"] == 1 and src.info["durations_trusted_from_bytes"] == TRUSTED_BYTES
    assert "allreduce" not in steps[1] and steps[1]["bucket_durations"][0]["duration"] == 0.0005
    assert steps[2]["allreduce"] == 0.0005 and steps[2]["allreduce_bytes"] == TRUSTED_BYTES
    assert all("exposed" not in s for s in steps)  # no DDP timings: not measured, not 0


def test_flight_recorder_entries_of_an_unnamed_group_are_kept_by_time():
    src = FlightRecorderSource(_FakeGroup())
    t0 = src.clocks["realtime"][0]
    src.clocks["realtime"].append(t0 + 100)
    ours = src._ours([_entry(t0 + 10, group="other"), _entry(t0 + 20, group="other")])
    assert len(ours) == 2 and not src.info["group_matched"]


# -- reading a validation record -------------------------------------------------

def _round_row(builtin, light):
    return {"builtin": {"s_per_step": builtin},
            "light": {"s_per_step": light, "comm_source": "ddp_logging", "median": {"allreduce": 1e-4}}}


def test_validation_summary_of_a_synthetic_record():
    ranks = [{"rounds": [_round_row(2e-3, 2.06e-3), _round_row(2.1e-3, 2.12e-3), _round_row(2e-3, 2.2e-3)]},
             {"rounds": [_round_row(1.9e-3, 2.0e-3), _round_row(2.2e-3, 2.1e-3), _round_row(2e-3, 2.1e-3)]}]
    summary = summarize_run(ranks)
    assert summary["modes"]["light"]["rounds"] == 3
    # per round, the slowest rank: 2.06/2.0, 2.12/2.2, 2.2/2.0
    assert summary["modes"]["light"]["overhead_median"] == pytest.approx(0.03)
    agreement = {"light": {"comm_source": "flight_recorder", "nccl_allreduce_kernels": 50,
                           "timer_buckets": 50, "bucket_ratio_median": 1.04, "bucket_within_10pct": 0.96}}
    probe = {"env_set": {"TORCH_NCCL_ENABLE_TIMING": "1"}, "log": ["a line"],
             "worker": {"at_once": {"with_duration": 0, "entries": 5},
                        "after_sync_and_0.5s": {"with_duration": 5, "entries": 5, "dump_s": 0.002}}}
    fr_kernels = {"entries": 30, "kernels": 30, "with_duration": 30,
                  "256MB": {"ratio_median": 1.01, "within_10pct": 1.0}}
    rec = {"results": {"runs": {"main": {"world_size": 1, "summary": summary, "agreement": agreement,
                                         "fr_kernels": fr_kernels, "micro": {"ddp_logging_read_us": 4.0}}},
                       "probes": {"probe_timing_env": probe}}}
    rows = validation_summary(rec)
    over = {r["mode"]: r for r in rows if r["check"] == "overhead"}
    assert over["light"]["overhead_pct"] == 3.0 and over["light"]["within_budget"] is True
    assert over["builtin"]["within_budget"] is None
    agree = next(r for r in rows if r["check"] == "agreement")
    assert agree["agrees"] is True and agree["ratio_median"] == 1.04
    fr = next(r for r in rows if r["check"] == "flight_recorder")
    assert (fr["with_duration_at_once"], fr["with_duration_after_wait"], fr["dump_ms"]) == (0, 5, 2.0)
    assert next(r for r in rows if r["check"] == "micro")["ddp_logging_read_us"] == 4.0
    frk = next(r for r in rows if r["check"] == "fr_kernels")
    assert frk["ratio_median"] == {"256MB": 1.01} and frk["within_10pct"] == {"256MB": 1.0}


def test_profiler_kernels_are_paired_with_the_timers_buckets_in_order():
    kernels = [("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 10.0 + 100 * i, 30.0 + 100 * i) for i in range(4)]
    kernels.append(("void at::native::vectorized_elementwise_kernel", 0.0, 5.0))
    steps = [{"bucket_durations": [{"duration": 21e-6}, {"duration": 19e-6}], "allreduce_calls": 2},
             {"buckets": [{"start": 0.0, "end": 20e-6}, {"start": 1.0, "end": 1.0 + 30e-6}]}]
    got = kernels_against_timer(kernels, steps, "flight_recorder")
    assert got["nccl_allreduce_kernels"] == 4 and got["timer_buckets"] == 4
    assert got["bucket_ratio_median"] == pytest.approx(1.0, abs=0.06)
    assert got["bucket_within_10pct"] == 0.75  # 1.05, 0.95, 1.0 and 1.5
    assert got["step_ratio_median"] == pytest.approx((1.0 + 1.25) / 2)
    none = kernels_against_timer(kernels[-1:], steps, "flight_recorder")
    assert none["nccl_allreduce_kernels"] == 0 and "no NCCL" in none["note"]


def test_a_rank_value_is_read_through_accessors_whether_bare_or_under_the_timer_key():
    from ddp_lessons.tool.runs import timer_of
    res = {"steps": [{"step": i, "step_time": 0.1 * (i + 1)} for i in range(4)], "account": {"startup": 1.5}}
    for value in (res, {"timer": res, "loss": 0.3, "steps": 7}):   # a worker's own "steps" key is not the timer's
        rank = Rank(value)
        assert timer_of(value) is res and rank.timer is res
        assert [s["step"] for s in rank.steps(skip=2)] == [2, 3]
        assert rank.account == {"startup": 1.5}
        assert rank.median_step(2)["step_time"] == pytest.approx(0.35)
    assert timer_of({"times": res}) is None and timer_of({"steps": [1, 2]}) is None
    with pytest.raises(ValueError, match="under 'timer'"):
        Rank({"loss": 0.3})


def test_ddp_timings_read_on_a_sample_of_steps_leave_every_step_its_exposed_and_wait():
    ranks = launch(w.light_mode, (20, 0.0, 4), world_size=2)
    for r in ranks:
        have = [s["step"] for s in r["steps"] if "ddp_exposed" in s]
        assert r["ddp_logging"]["sample_every"] == 4
        # DDP records its first 10 iterations and then every 4th: the rest of the 20 steps have none
        assert 10 <= len(have) < 20 and set(range(1, 10)) <= set(have)
        # the other steps' all-reduce span is unknown, not 0 (no flight recorder on gloo) ...
        assert all(("allreduce" in s) == ("ddp_exposed" in s) for s in r["steps"])
        # ... but every step has its exposed part and its wait (the compute end's mark)
        assert all("exposed" in s and "wait" in s for s in r["steps"])
    m = measures(Run(ranks)[0])
    assert m.exposed == pytest.approx(sum(s["exposed"] for s in ranks[0]["steps"]))


# -- what the timer sees through torch's hooks ---------------------------------

def test_the_timer_tells_optimizer_steps_from_micro_steps_without_being_told():
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    timer = StepTimer(model)   # a plain model: the 1-process baseline
    for i in range(8):
        with timer.phase("forward"):
            loss = model(torch.randn(2, 4)).sum()
        with timer.phase("backward"):
            loss.backward()
        if i % 4 == 3:
            opt.step()           # no phase named "optimizer": torch's hook tells the timer
        timer.step_done()
    steps = timer.result()["steps"]
    assert [s["optimizer_steps"] for s in steps] == [0, 0, 0, 1] * 2
    assert Rank(timer.result()).iterations(0) == pytest.approx(
        [sum(s["step_time"] for s in steps[:4]), sum(s["step_time"] for s in steps[4:])], rel=0.5)


def test_an_optimizer_timed_after_its_micro_step_closed_belongs_to_that_micro_step():
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    timer = StepTimer(model)
    for i in range(4):
        with timer.phase("forward"):
            loss = model(torch.randn(2, 4)).sum()
        with timer.phase("backward"):
            loss.backward()
        timer.step_done()
        if i % 2 == 1:
            with timer.phase("optimizer"):   # a phase of its own, after step_done: not a step of its own
                opt.step()
            timer.step_done()
    steps = timer.result()["steps"]
    assert len(steps) == 4 and [s["optimizer_steps"] for s in steps] == [0, 1, 0, 1]
    assert "optimizer" in steps[1]["phases"] and "optimizer" not in steps[0]["phases"]


def test_a_phase_named_like_the_timers_own_numbers_is_refused():
    timer = StepTimer(None)
    for name in ("data", "step_time", "wait", "exposed", "allreduce"):
        with pytest.raises(ValueError, match="timer's own per-step numbers.*data_wait"):
            timer.phase(name)


def test_gather_brings_every_ranks_result_to_rank_0_in_a_script_that_owns_its_group():
    out = launch(w.gather_from_a_script, world_size=2)
    assert out[1] is None
    ranks, me = out[0]
    assert me == 0 and [Rank(v).rank for v in ranks] == [0, 1] and all(v["steps"] == 4 for v in ranks)
    assert len(Run(ranks)) == 2


def test_a_batch_fetched_mid_step_is_its_data_wait_and_the_buckets_tensors_are_kept():
    (res,) = launch(w.mid_step_fetch_and_buckets, world_size=1)
    assert all(s["data"] >= 0.009 for s in res["steps"]) and len(res["steps"]) == 5
    tensors = res["model"]["bucket_tensors"]
    assert len(tensors) >= 2 and sum(map(sum, tensors)) == res["model"]["grad_bytes"]
    assert res["model"]["find_unused_parameters"] is False and res["kind"] == "ddp-lessons/step-timer"


# A fresh interpreter, world size 1: a timed DDP model trains, the script frees the timer and the model,
# then destroys the group. The reducer (C++) holds the timing hook's state: if that were the timer (which
# holds the model), the cycle would hide from Python's collector, and the group with gloo's threads would
# live to the interpreter's exit, where torch 2.13 aborts a rank now and then.
_FREED = """
import gc, os, socket, weakref
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
from ddp_lessons.tool import runtime
from ddp_lessons.tool.timing import StepTimer
import torch
import torch.distributed as dist
runtime.init_from_env("gloo")
group = weakref.ref(dist.distributed_c10d._get_default_group())
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8))
timer = StepTimer(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    with timer.phase("forward"):
        loss = model(torch.randn(4, 8)).sum()
    timer.finish_step(loss, opt)
steps = len(timer.result()["steps"])
del timer, model, opt, loss
dist.destroy_process_group()
print("steps", steps, "group freed:", group() is None)
"""


def test_freeing_the_timer_and_its_model_frees_the_process_group():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _FREED], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "steps 3 group freed: True" in out.stdout, out.stdout + out.stderr[-2000:]


def test_the_timing_hook_sends_as_the_timer_did_once_the_timer_is_gone():
    from ddp_lessons.tool.timing.comm import HookState, timed_comm_hook
    sent = []

    def send(state, bucket):
        sent.append((state, bucket))
        return "future"

    class Timer:
        state, _send = "group", staticmethod(send)
    t = Timer()
    hs = HookState(t)
    del t
    assert timed_comm_hook(hs, "bucket") == "future" and sent == [("group", "bucket")]


def test_clocks_of_several_hosts_are_put_on_one_axis_by_rate_and_waits_under_the_error_are_not_resolved():
    """Two hosts whose clocks tick at rates 1 and 1 + 1e-4: an offset alone (the barriers' exits as one instant)
    shifts a late step by 100 ppm of its time (0.36 s after an hour); the rate from the two barriers takes it out."""
    from ddp_lessons.tool.timing.sync import waits_from
    hour = 3600.0
    ready0 = [10.0, 1800.0, 3590.0]                     # rank 0's ready times, its own clock
    fast = 1 + 1e-4
    ready1 = [(t + 0.05) * fast for t in ready0]         # rank 1 ready 50 ms later each time, on a faster clock
    seen = [(hour, ready0), (hour * fast, ready1)]
    info, waits = waits_from(seen, 0, hosts=True, drift=0.0)
    assert info["rates"][1] == pytest.approx(1 / fast)
    assert waits == pytest.approx([0.05, 0.05, 0.05], abs=1e-6)   # rank 0 waited 50 ms each time, at any hour
    offset_only = [r1 - r0 for r0, r1 in zip(ready0, ready1, strict=True)]
    assert offset_only[-1] > 0.05 + 0.3                              # what an offset alone would say
    _, tiny = waits_from([(hour, [1.0]), (hour, [1.0001])], 0, hosts=True, drift=0.0)
    assert tiny == [0.0]                                            # 0.1 ms: under the barriers' skew
    _, one_host = waits_from([(hour, [1.0]), (hour, [1.0001])], 0, hosts=False, drift=0.0)
    assert one_host == pytest.approx([1e-4])                        # one host: one clock, resolved
