"""Where the light timer gets the all-reduce from, with DDP's own all-reduce left alone.

Two sources, both in torch, neither a Python communication hook: DDP's own per-iteration
timings (`DDPLogging`, read once per step), and NCCL's flight recorder (`FlightRecorderSource`,
NCCL only, dumped once at `result()`). Each class's docstring says where in torch the numbers
come from and what reading them costs.
"""

from __future__ import annotations

from typing import Any

import pickle
import time

_DTYPE_BYTES = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Int": 4, "Long": 8,
                "Char": 1, "Byte": 1, "Bool": 1, "Short": 2}


class DDPLogging:
    """DDP's per-iteration communication timings, read once per step.

    With `_set_ddp_runtime_logging_sample_rate(k)` the reducer records five events in every k-th
    iteration (forward start, backward compute start and end, first bucket handed to
    communication, last all-reduce waited for: torch/csrc/distributed/c10d/reducer.cpp,
    `mark_bucket_ready`, `finalize_backward`) and `Logger::set_runtime_stats_and_log`, called by
    DDP's `_pre_forward` before the next forward, turns them into `backward_comm_time` and
    `backward_compute_comm_overlap_time` (ns). On CUDA that call synchronises on the previous
    iteration's events (reducer_cuda.cpp, `CudaTimer::measureDifference`): one host wait per step,
    on work that is normally done by then. The numbers are read once per step
    (`logger._get_ddp_logging_data().ints_map`, a few microseconds), the last step's at `finish`."""

    def __init__(self, ddp_model, sample_every: int = 1):
        self.model, self.sample_every = ddp_model, sample_every
        # DDP records iterations 1 to 10 and then every `sample_every`-th (Reducer::should_collect_runtime_stats)
        ddp_model._set_ddp_runtime_logging_sample_rate(sample_every)
        self.readings: list[tuple[int, Any]] = []        # (timer step the numbers describe, ints)
        self._last_iter = self._ints().get("iteration")

    def _ints(self):
        return self.model.logger._get_ddp_logging_data().ints_map

    def read(self, step: int) -> None:
        """Called when timer step `step` closes: DDP then holds step-1's numbers
        (it records an iteration at the start of the next forward)."""
        ints = self._ints()
        it = ints.get("iteration")
        if it != self._last_iter and step > 0:
            self.readings.append((step - 1, ints))
        self._last_iter = it

    def finish(self, last_step: int) -> None:
        """Have DDP record the last iteration now (it would at the next forward)."""
        if last_step < 0:
            return
        try:
            self.model.logger.set_runtime_stats_and_log()
        except Exception:  # noqa: BLE001 - no last reading is not fatal
            return
        self.read(last_step + 1)

    def per_step(self) -> dict:
        """{step: {allreduce_span, exposed, calls, grad_bytes}} in seconds and bytes."""
        sizes = _bucket_sizes(self.model)
        out: dict[int, dict] = {}
        for step, ints in self.readings:
            comm = ints.get("backward_comm_time")
            if comm is None:
                continue
            overlap = ints.get("backward_compute_comm_overlap_time", 0)
            n = ints.get("num_buckets_reduced", len(sizes["rebuilt"] or sizes["initial"]))
            cur = sizes["rebuilt"] if ints.get("has_rebuilt_buckets") and sizes["rebuilt"] else sizes["initial"]
            out[step] = {"allreduce_span": comm / 1e9, "exposed": max(0.0, (comm - overlap) / 1e9),
                         "calls": n, "grad_bytes": sum(cur[:n])}
        return out


def _bucket_sizes(model) -> dict:
    strs = model.logger._get_ddp_logging_data().strs_map

    def parse(s):
        return [int(x) for x in s.replace(" ", "").split(",") if x] if s else []
    return {"initial": parse(strs.get("bucket_sizes")), "rebuilt": parse(strs.get("rebuilt_bucket_sizes"))}


def is_nccl(ddp_model) -> bool:
    import torch.distributed as dist
    try:
        return dist.get_backend(ddp_model.process_group) == "nccl"
    except Exception:  # noqa: BLE001 - no process group on the model
        return False


def flight_recorder_available() -> bool:
    try:
        from torch._C._distributed_c10d import _dump_nccl_trace  # type: ignore[attr-defined] # noqa: F401
    except ImportError:
        return False
    return True


def dump_flight_recorder():
    """(entries, seconds the dump took); ([], s) where there is no recorder."""
    t0 = time.perf_counter()
    try:
        from torch._C._distributed_c10d import _dump_nccl_trace  # type: ignore[attr-defined]
        raw = _dump_nccl_trace(includeCollectives=True, includeStackTraces=False, onlyActive=False)
    except Exception:  # noqa: BLE001 - no NCCL, or a torch without the recorder
        return [], time.perf_counter() - t0
    entries = pickle.loads(raw).get("entries", []) if raw else []
    return entries, time.perf_counter() - t0


def entry_bytes(e: dict) -> int:
    n = 0
    for sizes, dt in zip(e.get("input_sizes") or [], e.get("input_dtypes") or [], strict=True):
        numel = 1
        for d in sizes:
            numel *= d
        n += numel * _DTYPE_BYTES.get(dt, 4)
    return n


def is_allreduce(e: dict) -> bool:
    name = str(e.get("profiling_name", "")).lower()
    return "all_reduce" in name or "allreduce" in name


def group_name(pg):
    try:
        return pg.group_name
    except Exception:  # noqa: BLE001 - older torch, or not a real group
        return None


# The recorder's durations agreed with the profiler's NCCL kernel times within 10% only at 256 MB
# (1.01x); at 32 MB they were 1.3-1.6x and at 4 MB 2.8-6.2x the kernel (timer-validation-h200x1): below
# this size a step's `allreduce` is not taken from them (they stay in `bucket_durations`, flagged).
TRUSTED_BYTES = 256 << 20


class FlightRecorderSource:
    """This process group's all-reduces from the flight recorder, by step.

    Every collective gets an entry; when timing is on for the process group
    (TORCH_NCCL_ENABLE_TIMING read when the group is created, or
    `ProcessGroup._enable_collectives_timing()` after), the entry holds a start and an end CUDA
    event around the kernel on NCCL's stream, and the watchdog thread fills `duration_ms` when it
    retires a completed entry (FlightRecorderDetail.hpp, `retire_id`). Nothing runs on the
    training thread per step; the ring is dumped once (`collect`), and each step gets the entries
    created (host clock, `time_created_ns`) between its start and its end. The ring holds the last
    TORCH_NCCL_TRACE_BUFFER_SIZE entries (TORCH_FR_BUFFER_SIZE in newer torch)."""

    def __init__(self, pg, enable_timing: bool = True):
        self.group = group_name(pg)
        self.timing_enabled = False
        if enable_timing:
            try:
                pg._enable_collectives_timing()  # start events from now on (ProcessGroupNCCL::enableCollectivesTiming)
                self.timing_enabled = True
            except Exception:  # noqa: BLE001 - a backend without it: entries without durations
                pass
        # The recorder stamps entries with c10::getTime(), CLOCK_REALTIME; the
        # monotonic clock is kept too, in case a torch stamps with that one.
        self.clocks = {"realtime": [time.time_ns()], "monotonic": [time.monotonic_ns()]}
        self.bounds = self.clocks["realtime"]
        self.info: dict[str, Any] = {}

    def step_done(self) -> None:
        self.clocks["realtime"].append(time.time_ns())
        self.clocks["monotonic"].append(time.monotonic_ns())

    def extend_last(self) -> None:
        """The last step went on (an optimizer step timed after it closed): move its end to now."""
        self.clocks["realtime"][-1] = time.time_ns()
        self.clocks["monotonic"][-1] = time.monotonic_ns()

    def _ours(self, entries):
        """All-reduces created while the timer ran, on its group where names match."""
        best = None
        for name, bounds in self.clocks.items():  # realtime first: it wins ties
            lo, hi = bounds[0], bounds[-1]
            inside = [e for e in entries if is_allreduce(e) and lo <= e.get("time_created_ns", -1) < hi]
            if best is None or len(inside) > len(best):
                best, self.bounds, self.info["clock"] = inside, bounds, name
        mine = [e for e in best if _pg_of(e) == self.group]
        self.info["group_matched"] = bool(mine)
        return mine or best  # no name matched: every all-reduce in the window (names differ by torch)

    def collect(self, sync=None, wait_s: float = 0.6) -> dict:
        """{step: [{"index", "duration", "bytes"}]}; waits up to `wait_s` for the
        watchdog to fill in durations of completed entries."""
        if sync is not None:
            sync()
        deadline, waited = time.perf_counter() + wait_s, 0
        while True:
            entries, dump_s = dump_flight_recorder()
            ours = self._ours(entries)
            missing = sum(1 for e in ours if e.get("duration_ms") is None)
            if not (self.timing_enabled and missing) or time.perf_counter() > deadline:
                break
            time.sleep(0.12)  # the watchdog looks every 100 ms
            waited += 1
        self.info.update(entries=len(entries), ours=len(ours), without_duration=missing,
                         dump_s=dump_s, waits=waited, timing_enabled=self.timing_enabled,
                         group=self.group, first_step_kept=None)
        return self._by_step(ours)

    def _by_step(self, ours) -> dict:
        import bisect
        out: dict[int, list] = {}
        for e in sorted(ours, key=lambda e: e.get("time_created_ns", 0)):
            step = bisect.bisect_right(self.bounds, e["time_created_ns"]) - 1
            if 0 <= step < len(self.bounds) - 1:
                d = e.get("duration_ms")
                buckets = out.setdefault(step, [])
                buckets.append({"index": len(buckets), "duration": None if d is None else d / 1e3,
                                "bytes": entry_bytes(e)})
        first = min(out) if out else None
        # the ring keeps the newest entries only: steps before the first one kept were dropped from it
        self.info.update(first_step_kept=first, steps_dropped=first or 0,
                         durations_trusted_from_bytes=TRUSTED_BYTES)
        return out


def _pg_of(e):
    pg = e.get("process_group")
    return pg[0] if isinstance(pg, (list, tuple)) and pg else pg


def ddp_logging_times(ddp_model) -> dict:
    """DDP's own per-iteration timings (seconds), from its private logging data.

    Call `ddp_model._set_ddp_runtime_logging_sample_rate(1)` right after
    wrapping to sample every step. DDP reports step k at the start of step k+1.
    Exposed = backward_comm_time - backward_compute_comm_overlap_time.
    """
    data = ddp_model._get_ddp_logging_data()
    ns = {k: data.get(k, 0) / 1e9 for k in ("forward_compute_time", "backward_compute_time",
                                             "backward_comm_time", "backward_compute_comm_overlap_time")}
    ns["exposed"] = ns["backward_comm_time"] - ns["backward_compute_comm_overlap_time"]
    return ns
