"""Checks of the timer against other clocks (run by benchmarks/timer_validation.py).

- `profile_all`: a few dozen steps of each timer mode under torch.profiler;
  the NCCL all-reduce kernels it records, step by step and kernel by kernel,
  against the timer's all-reduce times for the same steps;
- `micro`: what the small pieces cost per call (DDP's logging data, a mark
  from the event ring against a new event per mark, the flight recorder dump);
- `fr_probe`: does the flight recorder fill `duration_ms`, and when.
"""

from __future__ import annotations

import collections
import statistics
import time

import torch
import torch.distributed as dist

from ddp_lessons.tool import runtime
from ddp_lessons.tool.ddp import sync
from ddp_lessons.tool.timing import light
from ddp_lessons.tool.timing.clocks import cuda_clock
from benchlib import timer_bench as bench

AGREE = 0.10  # the bound: within 10% of the kernel time


def profile_all(cfg, data, groups) -> dict:
    out = {}
    for mode in cfg["agree_modes"]:
        try:
            out[mode] = profile_mode(mode, cfg, data, groups)
        except Exception as exc:  # noqa: BLE001 - recorded; the next mode runs
            out[mode] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    return out


def profile_mode(mode, cfg, data, groups) -> dict:
    from torch.profiler import ProfilerActivity, profile
    model, opt, timer = bench.build(mode, cfg, groups)
    dev, (x, y), n = runtime.device(), data, cfg["profile_steps"]
    for _ in range(cfg["warmup"]):
        bench.step(model, opt, timer, x, y)
    sync(dev)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(n):
            bench.step(model, opt, timer, x, y)
        sync(dev)
    res = timer.result()
    kernels = [(e.name, e.time_range.start, e.time_range.end) for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA]
    steps = res["steps"][cfg["warmup"]:cfg["warmup"] + n]
    return kernels_against_timer(kernels, steps, res["comm_source"])


def _timer_buckets(s):
    durs = [b["duration"] for b in s.get("bucket_durations") or []]
    if durs and None not in durs:
        return durs
    return [b["end"] - b["start"] for b in s.get("buckets", [])]


def kernels_against_timer(kernels, steps, comm_source) -> dict:
    """Kernel times (us, profiler) against the timer's (s), paired in order."""
    names = collections.Counter(k[0] for k in kernels)
    nccl = sorted((k for k in kernels if "nccl" in k[0].lower()), key=lambda k: k[1])
    ar = [k for k in nccl if "allreduce" in k[0].lower().replace("_", "")]
    ours = [_timer_buckets(s) for s in steps]
    flat = [d for b in ours for d in b]
    out = {"comm_source": comm_source, "steps": len(steps), "device_kernels": len(kernels),
           "kernel_names": dict(names.most_common(12)), "nccl_kernels": len(nccl),
           "nccl_allreduce_kernels": len(ar), "timer_buckets": len(flat),
           "timer_bucket_median_s": statistics.median(flat) if flat else None,
           "timer_step_allreduce_median_s": _med([s.get("allreduce") for s in steps]),
           "timer_step_span_median_s": _med([s.get("allreduce_span") for s in steps])}
    if not ar:
        out["note"] = ("no NCCL all-reduce kernel in the profile" + (
            ": at world size 1 an in-place all-reduce needs no device work, so there is no "
            "kernel time to agree with" if runtime.world_size() == 1 else ""))
        return out
    kern = [(b - a) / 1e6 for _, a, b in ar]
    out["kernel_median_s"] = statistics.median(kern)
    if len(kern) == len(flat):
        out.update(_ratios("bucket", flat, kern))
    counts = [len(b) or s.get("allreduce_calls", 0) for b, s in zip(ours, steps, strict=True)]
    if sum(counts) != len(kern):
        out["note"] = f"{len(kern)} all-reduce kernels against {sum(counts)} timed all-reduces: not paired"
        return out
    per_step = [sum(b) if b else s.get("allreduce", 0.0) for b, s in zip(ours, steps, strict=True)]
    starts = [sum(counts[:j]) for j in range(len(counts))]
    out.update(_ratios("step", per_step, [sum(kern[a:a + c]) for a, c in zip(starts, counts, strict=True)]))
    return out


def _ratios(what, timer_s, kernel_s) -> dict:
    r = [t / k for t, k in zip(timer_s, kernel_s, strict=True) if k > 0]
    return {f"{what}_ratio_median": _med(r), f"{what}_ratio_p10": _q(r, 0.1),
            f"{what}_ratio_p90": _q(r, 0.9),
            f"{what}_within_10pct": sum(abs(x - 1) <= AGREE for x in r) / len(r) if r else None}


def fr_vs_profiler(cfg, data, groups) -> dict:
    """Flight-recorder durations against profiler kernel times, collective by
    collective, on all-reduces big enough to time (4, 32, 256 MB). With AVG:
    at world size 1 NCCL runs a kernel for it (a scaling), for SUM it runs none."""
    from torch.profiler import ProfilerActivity, profile
    dev, g = runtime.device(), groups["timed"]
    g._enable_collectives_timing()
    op = dist.ReduceOp.AVG if dev.type == "cuda" else dist.ReduceOp.SUM  # gloo has no AVG
    sizes = (4, 32, 256) if dev.type == "cuda" else (1, 2, 4)  # MB; small on CPUs (a dry run)
    bufs = {mb: torch.ones(mb << 18, device=dev) for mb in sizes}
    for t in bufs.values():
        dist.all_reduce(t, op=op, group=g)
    sync(dev)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=acts) as prof:
        for t in bufs.values():
            for _ in range(cfg.get("fr_kernel_reps", 10)):
                dist.all_reduce(t, op=op, group=g)
        sync(dev)
    time.sleep(0.3)  # the watchdog fills durations every 100 ms
    entries, _ = light.dump_flight_recorder()
    reps = cfg.get("fr_kernel_reps", 10)
    # Ours: the probe's own all-reduces, by their sizes, the last len(sizes) * reps of them
    # (the ring also holds DDP's and the warm-up's; a time filter alone cannot tell them apart).
    numels = {t.numel() for t in bufs.values()}
    probe = sorted((e for e in entries if light.is_allreduce(e)
                    and any(_numel(sz) in numels for sz in e.get("input_sizes") or [])),
                   key=lambda e: e.get("time_created_ns", 0))
    ours = probe[-len(bufs) * reps:] if len(probe) >= len(bufs) * reps else []
    # Kernels: device work only. The profiler also puts the "nccl:all_reduce" annotation on
    # the device track; the kernel is "ncclDevKernel_..." (or, at world size 1, NCCL's onerank one).
    kernels = sorted(((e.name, e.time_range.start, e.time_range.end) for e in prof.events()
                      if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith("nccl:")
                      and not e.name.startswith("Memcpy") and not e.name.startswith("Memset")),
                     key=lambda k: k[1])
    out = {"op": str(op), "entries": len(ours), "kernels": len(kernels),
           "with_duration": sum(e.get("duration_ms") is not None for e in ours),
           "kernel_names": dict(collections.Counter(k[0][:80] for k in kernels).most_common(5))}
    if not ours or len(kernels) != len(ours):
        out["note"] = "flight-recorder entries and kernels not paired (counts differ or no entries)"
        return out
    for i, mb in enumerate(bufs):
        pairs = [(e.get("duration_ms"), (b - a) / 1e3) for e, (_, a, b) in
                 zip(ours[i * reps:(i + 1) * reps], kernels[i * reps:(i + 1) * reps], strict=True)]
        r = [d / k for d, k in pairs if d is not None and k > 0]
        out[f"{mb}MB"] = {"fr_ms": _med([d for d, _ in pairs]), "kernel_ms": _med([k for _, k in pairs]),
                          "ratio_median": _med(r),
                          "within_10pct": sum(abs(x - 1) <= AGREE for x in r) / len(r) if r else None}
    return out


def _numel(sizes) -> int:
    n = 1
    for d in sizes:
        n *= d
    return n


def _med(xs):
    xs = [x for x in xs if isinstance(x, (int, float))]
    return statistics.median(xs) if xs else None


def _q(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def micro(cfg, data, groups) -> dict:
    """Per-call costs, in microseconds of host time."""
    model, opt, _ = bench.build("builtin", cfg, groups)
    model._set_ddp_runtime_logging_sample_rate(1)
    dev, (x, y) = runtime.device(), data
    for _ in range(5):
        bench.step(model, opt, None, x, y)
    sync(dev)
    out = {"ddp_logging_read_us": _per_call(lambda: model.logger._get_ddp_logging_data().ints_map, 2000),
           "ddp_logging_dict_us": _per_call(model._get_ddp_logging_data, 500),
           "set_runtime_stats_us": _per_call(model.logger.set_runtime_stats_and_log, 500)}
    if dev.type == "cuda":
        ring = cuda_clock(dev, 4096)
        out["ring_mark_us"] = _per_call(ring.mark, 2000)
        out["new_event_mark_us"] = _per_call(lambda: torch.cuda.Event(enable_timing=True).record(), 2000)
        t0 = time.perf_counter()
        ring.seconds(range(2000))
        out["ring_read_2000_s"] = time.perf_counter() - t0
    entries, dump_s = light.dump_flight_recorder()
    out.update(fr_entries=len(entries), fr_dump_s=dump_s,
               fr_with_duration=sum(e.get("duration_ms") is not None for e in entries))
    return out


def _per_call(fn, n) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def _fr_stats(entries, group=None, since_ns=None) -> dict:
    if group is not None:
        entries = [e for e in entries if light._pg_of(e) == group]
    if since_ns is not None:
        entries = [e for e in entries if e.get("time_created_ns", 0) >= since_ns]
    durs = [e["duration_ms"] for e in entries if e.get("duration_ms") is not None]
    return {"entries": len(entries), "with_duration": len(durs),
            "duration_median_ms": statistics.median(durs) if durs else None,
            "states": dict(collections.Counter(str(e.get("state")) for e in entries)),
            "retired": sum(bool(e.get("retired")) for e in entries),
            "names": dict(collections.Counter(str(e.get("profiling_name")) for e in entries).most_common(5)),
            "keys": sorted(entries[-1].keys()) if entries else []}


def fr_probe(cfg) -> dict:
    """Steps of DDP and plain all-reduces, then the recorder: at once, after the
    watchdog had time, and for a group whose timing was turned on after it was made."""
    import os
    dev = runtime.device()
    out = {"env": {k: os.environ.get(k) for k in bench.ENV_KEYS}, "available": light.flight_recorder_available()}
    model, opt, _ = bench.build("builtin", cfg, {"plain": None, "timed": None})
    x, y = bench.make_data(cfg, dev)
    t = torch.randn(1 << 18, device=dev)
    for _ in range(cfg["probe_steps"]):
        bench.step(model, opt, None, x, y)
    for _ in range(10):
        dist.all_reduce(t)
    entries, s = light.dump_flight_recorder()
    out["at_once"] = dict(_fr_stats(entries), dump_s=s)
    sync(dev)
    time.sleep(0.5)  # the watchdog retires completed work every 100 ms
    entries, s = light.dump_flight_recorder()
    out["after_sync_and_0.5s"] = dict(_fr_stats(entries), dump_s=s)
    out.update(_probe_late_timing(t, dev))
    since = time.time_ns()
    for _ in range(cfg["probe_fill"]):  # fill the ring: how long a dump of a full one takes
        dist.all_reduce(t[:256])
    sync(dev)
    time.sleep(0.3)
    entries, s = light.dump_flight_recorder()
    out["filled"] = dict(_fr_stats(entries), dump_s=s, new=_fr_stats(entries, since_ns=since)["entries"])
    return out


def _probe_late_timing(t, dev) -> dict:
    """A new group, its collective timing turned on after it was made."""
    out = {}
    g = dist.new_group(list(range(runtime.world_size())))
    try:
        g._enable_collectives_timing()
        out["enabled_after_creation"] = True
    except Exception as exc:  # noqa: BLE001 - recorded
        out["enabled_after_creation"] = f"{type(exc).__name__}: {exc}"
    since = time.time_ns()
    for _ in range(20):
        dist.all_reduce(t, group=g)
    sync(dev)
    time.sleep(0.3)
    entries, s = light.dump_flight_recorder()
    out["group_name"] = light.group_name(g)
    out["group_timed_after_creation"] = dict(_fr_stats(entries, light.group_name(g)), dump_s=s)
    out["timed_after_creation_by_time"] = _fr_stats(entries, since_ns=since)
    return out
