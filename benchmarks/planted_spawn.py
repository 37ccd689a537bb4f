"""Does `doctor --confirm` rank three planted causes as removing each alone measures, on ranks mp.spawn starts?

The workload is benchmarks/workloads/spawned.py, a plain DDP script started with mp.spawn (as the ImageNet
example is) that never imports the package, with three causes planted: torch's default threads in each
spawned rank (4 on 2 cores), 2 loader workers a rank over cores that have none spare, and validation of
the whole held-out set on every rank. By hand: 5 interleaved rounds of the planted script and of each cause
removed alone by the script's own flag (--threads 1, --num-workers 0, --eval-sharded), each under the doctor,
timed by the script's own clock (`loop_s`). Then `doctor --confirm` on the planted script, as a user runs it:
its knobs in 5 rounds of its own and its ranking by what it measured. Saves a record (kind "planted-spawn").

    PYTHONPATH=$PWD/src python3 benchmarks/planted_spawn.py --rounds 5 --record planted-spawn-cpu2
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
from pathlib import Path

from ddp_lessons.tool import records, spread
from ddp_lessons.tool.doctor import command, doctor

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from benchlib.rounds import interleaved  # noqa: E402
from doctor_cost import marked  # noqa: E402

WORKLOAD = HERE / "workloads" / "spawned.py"
BY_HAND = {"as it is": [], "threads": ["--threads", "1"], "loader workers": ["--num-workers", "0"],
           "validation on every rank": ["--eval-sharded"]}
# what in the doctor's ranking stands for each planted cause
NAMES = {"threads": ("threads=",), "loader workers": ("num_workers=", "loader workers"),
         "validation on every rank": ("evaluation",)}


def one(name: str) -> dict:
    ran = command.run([sys.executable, str(WORKLOAD), *BY_HAND[name]], capture=True, timeout=600)
    reading = marked(ran.stdout or "", "SPAWNED") or {}
    return {"loop_s": reading.get("loop_s"), "returncode": ran.returncode, "seconds": ran.seconds}


def by_hand(runs: dict) -> list[dict]:
    base = [x["loop_s"] for x in runs["as it is"]]
    out = []
    for name in BY_HAND:
        if name != "as it is":
            cmp = spread.compare_rounds(base, [x["loop_s"] for x in runs[name]])
            out.append({"cause": name, "saved": 1 - cmp["median_ratio"], "compare": cmp})
    return sorted(out, key=lambda x: -x["saved"])


def cause_of(what: str) -> str | None:
    return next((c for c, keys in NAMES.items() if any(k in what for k in keys)), None)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--record", metavar="NAME")
    a = p.parse_args()
    runs, elapsed = interleaved(list(BY_HAND), a.rounds, one)
    hand = by_hand(runs)
    print("by hand:", [(h["cause"], round(h["saved"], 3), h["compare"]["verdict"]) for h in hand], flush=True)
    log = io.StringIO()
    up = doctor([sys.executable, str(WORKLOAD)], confirm=True, rounds=a.rounds, capture=True, log=log)
    print(str(up), flush=True)
    ranked = [{"what": w, "share": s, "how": h, "cause": cause_of(w)} for w, s, h in up.ranked]
    top = [r["cause"] for r in ranked if r["cause"]][:3]
    res = {"runs": runs, "elapsed_s": elapsed, "by_hand": hand, "doctor": {
        "diagnosis": str(up.diagnosis), "report": str(up), "confirmed": up.confirmed, "ranked": ranked,
        "settings": up.settings, "returncode": up.returncode, "rounds_log": log.getvalue()},
        "top_three_doctor": top, "top_three_by_hand": [h["cause"] for h in hand],
        "same_order": top == [h["cause"] for h in hand],
        "hand_median_loop_s": statistics.median(x["loop_s"] for x in runs["as it is"] if x["loop_s"])}
    print("doctor's top three:", top, "| by hand:", res["top_three_by_hand"], "| same:", res["same_order"])
    if a.record:
        rec = records.make_record("planted-spawn", {"script": "benchmarks/planted_spawn.py", **vars(a)}, res,
                                  backend="gloo")
        print("saved", records.save(rec, a.record, runs_dir=records.RUNS_DIR, overwrite=True))


if __name__ == "__main__":
    main()
