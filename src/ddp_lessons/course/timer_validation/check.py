"""Reading a timer validation record (benchmarks/timer_validation.py) back.

`summarize_run` turns the ranks' rounds into paired overheads: in each round
every mode's time per step over the built-in all-reduce's of the same round
(a step is as slow as its slowest rank), then the median and the spread over
rounds. `validation_summary(record)` gives the rows notebook 00 prints: one
per run and mode (overhead against the 5% budget), one per profiler
comparison (against the 10% bound), one per flight-recorder probe, one of
small per-call costs.
"""

from __future__ import annotations

import statistics

BUDGET = 0.05   # a timer mode may cost at most this much per step, paired
AGREE = 0.10    # timer against profiler kernel times
TIMER_MODES = ("light", "light_ddp", "full")


def summarize_run(outs: list) -> dict:
    """Per mode: median ms/step, paired overhead (median, min, max over rounds)."""
    rounds = [r for r in _rank_rounds(outs)]
    modes = list(dict.fromkeys(m for row in rounds for m in row))
    summary = {}
    for m in modes:
        times = [row[m] for row in rounds if m in row]
        pairs = [row[m] / row["builtin"] - 1 for row in rounds if m in row and row.get("builtin")]
        summary[m] = {"ms_per_step": statistics.median(times) * 1e3 if times else None,
                      "rounds": len(times), "overhead_median": _med(pairs),
                      "overhead_min": min(pairs) if pairs else None,
                      "overhead_max": max(pairs) if pairs else None}
    last = outs[0]["rounds"][-1] if outs and outs[0].get("rounds") else {}
    for m, v in last.items():
        if m in summary and isinstance(v, dict):
            summary[m].update({k: v[k] for k in ("comm_source", "median", "result_s", "flight_recorder")
                               if k in v})
    errors = [f"round {i} {m}: {v['error']}" for o in outs[:1] for i, row in enumerate(o.get("rounds", []))
              for m, v in row.items() if isinstance(v, dict) and "error" in v]
    return {"modes": summary, "errors": errors}


def _rank_rounds(outs):
    """Each round as {mode: seconds per step of the slowest rank}."""
    n = min((len(o.get("rounds", [])) for o in outs), default=0)
    for i in range(n):
        row = {}
        for m in outs[0]["rounds"][i]:
            vals = [o["rounds"][i].get(m, {}).get("s_per_step") for o in outs]
            if all(isinstance(v, (int, float)) for v in vals):
                row[m] = max(vals)
        yield row


def _med(xs):
    xs = [x for x in xs if isinstance(x, (int, float))]
    return statistics.median(xs) if xs else None


def _pct(x):
    return None if x is None else round(100 * x, 2)


def validation_summary(record: dict) -> list:
    """Rows (dicts) to print: overhead per run and mode, profiler agreement,
    flight-recorder probes, per-call costs. Defined in notebook 00_first_launch."""
    res = record.get("results", record)
    rows = []
    for name, run in res.get("runs", {}).items():
        rows += _overhead_rows(name, run)
        for mode, a in (run.get("agreement") or {}).items():
            if isinstance(a, dict):
                rows.append(_agreement_row(name, mode, a))
        if isinstance(run.get("fr_kernels"), dict):
            rows.append(_fr_kernel_row(name, run["fr_kernels"]))
        if isinstance(run.get("micro"), dict):
            rows.append({"check": "micro", "run": name, **{k: _round(v) for k, v in run["micro"].items()
                                                           if not isinstance(v, (dict, list))}})
    for name, p in res.get("probes", {}).items():
        rows.append(_probe_row(name, p))
    return rows


def _overhead_rows(name, run):
    rows = []
    for mode, m in (run.get("summary", {}).get("modes") or {}).items():
        ov = m.get("overhead_median")
        rows.append({"check": "overhead", "run": name, "world_size": run.get("world_size"),
                     "mode": mode, "ms_per_step": _round(m.get("ms_per_step")),
                     "overhead_pct": _pct(ov) if mode != "builtin" else 0.0,
                     "spread_pct": [_pct(m.get("overhead_min")), _pct(m.get("overhead_max"))],
                     "rounds": m.get("rounds"), "comm_source": m.get("comm_source"),
                     "within_budget": (ov <= BUDGET) if mode in TIMER_MODES and ov is not None else None})
    return rows


def _agreement_row(name, mode, a):
    if "error" in a:
        return {"check": "agreement", "run": name, "mode": mode, "error": a["error"][:200]}
    within = a.get("bucket_within_10pct", a.get("step_within_10pct"))
    ratio = a.get("bucket_ratio_median", a.get("step_ratio_median"))
    return {"check": "agreement", "run": name, "mode": mode, "comm_source": a.get("comm_source"),
            "nccl_allreduce_kernels": a.get("nccl_allreduce_kernels"),
            "timer_buckets": a.get("timer_buckets"), "ratio_median": _round(ratio),
            "within_10pct": _round(within),
            "agrees": (ratio is not None and abs(ratio - 1) <= AGREE) if ratio is not None else None,
            "note": a.get("note")}


def _fr_kernel_row(name, f):
    sizes = {k: v for k, v in f.items() if k.endswith("MB") and isinstance(v, dict)}
    return {"check": "fr_kernels", "run": name, "entries": f.get("entries"), "kernels": f.get("kernels"),
            "with_duration": f.get("with_duration"),
            "ratio_median": {k: _round(v.get("ratio_median")) for k, v in sizes.items()},
            "within_10pct": {k: _round(v.get("within_10pct")) for k, v in sizes.items()},
            "note": f.get("note") or f.get("error")}


def _probe_row(name, p):
    if "error" in p:
        return {"check": "flight_recorder", "probe": name, "error": str(p["error"])[:200]}
    w = p.get("worker", {})
    pick = {k: w.get(k) or {} for k in ("at_once", "after_sync_and_0.5s")}
    return {"check": "flight_recorder", "probe": name, "env": p.get("env_set"),
            "entries": pick["after_sync_and_0.5s"].get("entries"),
            "with_duration_at_once": pick["at_once"].get("with_duration"),
            "with_duration_after_wait": pick["after_sync_and_0.5s"].get("with_duration"),
            "with_duration_timing_enabled_later": (w.get("timed_after_creation_by_time") or {}).get("with_duration"),
            "dump_ms": _round((pick["after_sync_and_0.5s"].get("dump_s") or 0) * 1e3),
            "full_ring_entries": (w.get("filled") or {}).get("entries"),
            "full_ring_dump_ms": _round(((w.get("filled") or {}).get("dump_s") or 0) * 1e3),
            "log": (p.get("log") or [None])[0]}


def _round(x, nd=4):
    return round(x, nd) if isinstance(x, float) else x
