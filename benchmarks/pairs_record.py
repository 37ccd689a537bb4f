"""Rows, pairs and run records of interleaved repeats, for record_gpu_pairs.py.

A row is one run of one variant in one round: its step times and their spread
(`spread.summary` after the warm-up steps), or the error it raised. A pair
compares two variants round by round (`spread.compare_rounds`). `run_rounds` runs
the rounds in their interleaved order, saves the record after every run, and
starts no round the time budget cannot hold.
"""

from __future__ import annotations

import time
import traceback

from ddp_lessons.tool import records, spread


def say(line: str, log: str | None) -> None:
    print(line, flush=True)
    if log:
        with open(log, "a") as f:
            f.write(line + "\n")


# -- rows, pairs, records ------------------------------------------------------
def step_row(step_times, skip: int, **extra) -> dict:
    """One run: every step time (s), and the spread of those after `skip` warm-up steps."""
    later = step_times[skip:] or step_times
    s = spread.summary(later)
    return {"ok": True, "step_times": list(step_times), "skip": skip, "summary": s,
            "steady": s["iqr_rel"] <= spread.STEADY_IQR, **extra}


def error_row(exc: BaseException) -> dict:
    return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]}


def pairs_of(rows, pairs, rounds: int) -> list[dict]:
    """Every pair's per-round comparison of median step times (and wall times)."""
    def per_round(name, key):
        got = {r["round"]: r for r in rows if r["name"] == name and r["ok"]}
        return [key(got[i]) if i in got else None for i in range(rounds)]
    out = []
    for a, b, question in pairs:
        med = lambda r: r["summary"]["median"]  # noqa: E731
        wall = lambda r: r["wall"]  # noqa: E731
        row = {"a": a, "b": b, "question": question, "metric": "median step time after warm-up"}
        row.update(spread.compare_rounds(per_round(a, med), per_round(b, med)))
        row["faster"] = {spread.A_FASTER: a, spread.B_FASTER: b}.get(row["verdict"])
        row["wall"] = spread.compare_rounds(per_round(a, wall), per_round(b, wall))
        out.append(row)
    return out


def results_of(rows, order, pairs, status: str) -> dict:
    rounds = rounds_done(rows)
    ok = [r for r in rows if r["ok"]]
    return {"status": status, "rounds_done": rounds, "order": order[:rounds], "runs": rows,
            "pairs": pairs_of(rows, pairs, rounds),
            "steady": {"limit_iqr_rel": spread.STEADY_IQR, "runs": len(ok),
                       "within": sum(r["steady"] for r in ok),
                       "worst_iqr_rel": max((r["summary"]["iqr_rel"] for r in ok), default=None)}}


def save(sink: dict, rows, status: str) -> None:
    rec = records.make_record(sink["kind"], sink["config"], results_of(rows, sink["order"], sink["pairs"], status),
                              backend=sink["backend"])
    rec["machine"].update(sink.get("machine_extra", {}))
    records.save(rec, sink["path"], overwrite=True)


def rounds_done(rows) -> int:
    return 1 + max((r["round"] for r in rows), default=-1)


def pair_lines(pairs) -> list[str]:
    return [f"  {p['b']} / {p['a']}: median {p['median_ratio']:.3f} [{p['min_ratio']:.3f}, {p['max_ratio']:.3f}] "
            f"over {p['rounds']} rounds: {p['verdict']}" if p["rounds"] else
            f"  {p['b']} / {p['a']}: no paired rounds" for p in pairs]


def finish(sink: dict, rows, status: str = "complete") -> None:
    """The final record: `status`, or how far the time budget let it get."""
    done = rounds_done(rows)
    if status == "complete" and done < len(sink["order"]):
        status = f"stopped by the time budget after {done} of {len(sink['order'])} rounds"
    save(sink, rows, status)


def run_rounds(variants: dict, sink: dict, run_one, deadline: float, rank0: bool = True) -> list[dict]:
    """Run every round of `sink['order']` (names of `variants`), each variant once;
    save after each run; start no round that would end past `deadline` if it took as long
    as the longest round so far (the first, which warms up, counts only while it is alone)."""
    rows, took, log = [], [], sink.get("log")
    for r, names in enumerate(sink["order"]):
        if took and time.time() + max(took[1:] or took) > deadline:
            say(f"{sink['kind']}: budget spent, stopping after {r} rounds", log)
            break
        t_round = time.time()
        for pos, name in enumerate(names):
            t0 = time.time()
            try:
                row = run_one(name, variants[name])
            except Exception as exc:  # noqa: BLE001 - record it, run the rest
                row = error_row(exc)
            row.update(round=r, position=pos, name=name, seconds=time.time() - t0)
            rows.append(row)
            what = (f"median {row['summary']['median'] * 1e3:.2f} ms, IQR {row['summary']['iqr_rel']:.1%}"
                    f"{'' if row['steady'] else ' (not steady)'}" if row["ok"] else f"FAILED {row['error']}")
            if rank0:
                say(f"{sink['kind']} round {r + 1}/{len(sink['order'])} {name:18s} {what} "
                    f"({row['seconds']:.1f} s)", log)
                save(sink, rows, "running")
        took.append(time.time() - t_round)
        if rank0:
            for line in pair_lines(pairs_of(rows, sink["pairs"], rounds_done(rows))):
                say(line, log)
    return rows
