"""DDP runs simulated in lockstep, as StepTimer would report them: what `diagnose` is tested on.

Every rank starts a step when the all-reduce before it released every rank; a step waits for its
batch, runs its forward and backward; an all-reducing step's ranks are ready at their backward's end,
the last one ready sets everyone's release (plus the transfer); `wait` is how long after this rank the
last one was ready. Work outside the steps delays the rank that does it. A keyword given as a list is
per rank; a callable is called with (rank, step).
"""

from __future__ import annotations

from ddp_lessons.tool.timing.account import account

MIB = 1 << 20


def _at(v, rank, step=0):
    if callable(v):
        return v(rank, step)
    if isinstance(v, list):
        return v[rank]
    return v


def simulate(world=2, n=20, *, data=0.0, forward=0.02, bwd=0.02, opt=0.005, transfer=0.0, between=0.0,
             outside=(), startup=0.1, before=0.01, after=0.0, micro=1, no_sync=True, buckets=None,
             device="cpu", batch=32, threads=1, cores=8, host="box", loader=None, model=None, comm="hook",
             mode="full", waits=True, allreduce=None, passes=None, collectives=0.0):
    """Every rank's timer result. `outside`: (rank, after_step, name, seconds) tuples; `micro`:
    micro-steps per optimizer step (`no_sync`: all but the last skip the all-reduce); `buckets`: a list
    of (bytes, ready as a fraction of the backward, seconds to send) per all-reducing step, the last
    one ready at the backward's end (None: one bucket of 16 MiB); `waits=False` leaves the waits to be
    worked out from the ranks' ready times (the doctor's results); `collectives`: seconds of the script's own
    collectives at the start of each forward (inside it, as Lightning's sync_dist logging is)."""
    t = [before] * world
    steps = [[] for _ in range(world)]
    outs = [[] for _ in range(world)]
    extra = {(r, k): [] for r, k, _, _ in outside}
    for r, k, name, secs in outside:
        extra[(r, k)].append((name, secs))
    for k in range(n):
        last_micro = k % micro == micro - 1
        syncs = last_micro or not no_sync
        parts = []
        for r in range(world):
            d, f, b = (_at(x, r, k) for x in (data, forward, bwd))
            parts.append((t[r], d, f, b, t[r] + d + f + b))
        latest = max(p[4] for p in parts)
        release = latest + _at(transfer, 0, k) if syncs else None
        for r, (t0, d, f, b, ready) in enumerate(parts):
            end_bwd = release if syncs else ready
            o = _at(opt, r, k) if last_micro else 0.0
            end = end_bwd + o
            ph = {"forward": (d, d + f), "backward": (d + f, end_bwd - t0)}
            if last_micro:
                ph["optimizer"] = (end_bwd - t0, end - t0)
            s = {"step": k, "t_start": t0, "step_time": end - t0, "data": d, "phases": ph, "forward": f,
                 "backward": end_bwd - t0 - d - f, "backward_compute": b, "optimizer_steps": int(last_micro),
                 "forwards": 1, "sync": syncs, "buckets": [], "allreduce_calls": 0, "allreduce_bytes": 0,
                 "exposed": 0.0, "allreduce": 0.0}
            if last_micro:
                s["optimizer"] = o
            c = _at(collectives, r, k)
            if c:
                s.update(collectives=c, collective_calls=1, collective_spans=[(d, d + c)])
            if syncs:
                s["exposed"] = release - ready
                if waits:
                    s["wait"] = latest - ready
                s["ready"] = ready  # on its own axis: every rank's reference is 0
                s.update(_buckets(buckets, d + f, b, ready - t0, release - t0, allreduce))
            steps[r].append(s)
            t[r] = end + _at(between, r, k) / n
            for name, secs in extra.get((r, k), []):
                outs[r].append({"name": name, "start": t[r], "end": t[r] + secs})
                t[r] += secs
    out = []
    for r in range(world):
        wall = t[r] + _at(after, r)
        res = {"kind": "ddp-lessons/step-timer", "rank": r, "world_size": world, "backend": "gloo",
               "device": device, "batch_size": batch, "comm_source": comm, "mode": mode, "steps": steps[r],
               "outside": outs[r], "threads": _at(threads, r), "cores": cores, "host": host,
               "clock": {"error": 0.0, "offset": 0.0, "ref_host": 100.0, "host": host, "method": "shared host clock"},
               "account": account(wall, steps[r], outs[r], _at(startup, r)),
               "model": model or {"kind": "ddp", "bucket_cap_bytes": 25 * MIB, "find_unused_parameters": False,
                                  "unused_parameter_bytes": 0, "grad_bytes": 16 * MIB},
               "loader": loader, "unfinished_steps": 0}
        if passes:
            res["data_passes"], res["pass_starts"] = passes, [i * n // passes for i in range(passes)]
        out.append(res)
    return out


def _buckets(spec, start_bwd, bwd, ready, release, allreduce):
    spec = spec or [(16 * MIB, 1.0, 0.0)]
    rows, free = [], 0.0
    for i, (nbytes, frac, secs) in enumerate(spec):
        is_last = i == len(spec) - 1
        at = start_bwd + bwd * frac if not is_last else ready
        begin = max(at, free)
        end = release if is_last else min(release, begin + secs)
        free = end
        rows.append({"index": i, "start": at, "end": end, "bytes": nbytes, "grad_bytes": nbytes})
    busy = sum(b["end"] - max(b["start"], rows[i - 1]["end"] if i else 0) for i, b in enumerate(rows))
    return {"buckets": rows, "allreduce_calls": len(rows), "allreduce_bytes": sum(b["bytes"] for b in rows),
            "allreduce": busy if allreduce is None else allreduce}
