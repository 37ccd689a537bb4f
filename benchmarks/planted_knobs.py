"""Do `diagnose` and the doctor's `--confirm` rank planted causes as removing them measures?

The workload is benchmarks/workloads/knobs.py, a plain DDP script that never imports the package,
with three causes planted (many small buckets, a loader decoding every sample on every access with no
spare core, find_unused_parameters=True with nothing unused) and identical work on every rank, on 2
gloo ranks under torchrun. Every run goes through the doctor (zero lines), in interleaved rounds of:
the planted run ("all"); each cause removed by hand (the script's own flag); each knob the doctor
tries (the same run with one setting overridden at construction). Measured per run: the workload's
own clock (`loop_s`), the doctor's seconds per optimizer step, and what `diagnose` found.

    PYTHONPATH=$PWD/src python3 benchmarks/planted_knobs.py --rounds 5 --record planted-knobs-cpu2
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ddp_lessons import Run, diagnose
from ddp_lessons.tool import records, spread
from ddp_lessons.tool.diagnosis import causes as C
from ddp_lessons.tool.doctor import command, confirm

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from benchlib.rounds import interleaved, knobs_command  # noqa: E402
from doctor_cost import loop_seconds  # noqa: E402

CAUSES = {"small buckets": C.SMALL_BUCKETS, "per-sample decoding": C.DATA,
          "find_unused_parameters": "find_unused_parameters"}
SETUPS = {   # name -> (the script's flags, the doctor's knobs)
    "all": ([], {}),
    "by hand: bucket_cap_mb=25": (["--bucket-cap-mb", "25"], {}),
    "by hand: predecode": (["--predecode"], {}),
    "by hand: find_unused=0": (["--find-unused", "0"], {}),
    "knob: bucket_cap_mb=25": ([], {"ddp": {"bucket_cap_mb": 25}}),
    "knob: num_workers=1": ([], {"loader": {"num_workers": 1, "persistent_workers": True}}),
    "knob: find_unused_parameters=False": ([], {"ddp": {"find_unused_parameters": False}}),
}
REMOVES = {"by hand: bucket_cap_mb=25": "small buckets", "by hand: predecode": "per-sample decoding",
           "by hand: find_unused=0": "find_unused_parameters", "knob: bucket_cap_mb=25": "small buckets",
           "knob: num_workers=1": "per-sample decoding", "knob: find_unused_parameters=False": "find_unused_parameters"}
# advice that would plant a cause again, by the setup that removed it
REPLANTS = {"by hand: bucket_cap_mb=25": ("a bucket_cap_mb below", "smaller bucket_cap_mb", "bucket_cap_mb=0"),
            "by hand: find_unused=0": ("find_unused_parameters=True",), "by hand: predecode": ("workers",)}


def one(cmd, name, tries: int = 3) -> dict:
    """One run of a setup under the doctor; a run that fails (torch's gloo can abort a rank at exit now and
    then) is made again, up to `tries` times, each failure's last lines kept."""
    flags, knobs = SETUPS[name]
    failures = []
    for _ in range(tries):
        load = os.getloadavg()[0]
        ran = command.run([*cmd, *flags], knobs=knobs, capture=True, timeout=600)
        if ran.returncode == 0 and loop_seconds(ran.stdout or "") is not None:
            break
        failures.append({"returncode": ran.returncode, "tail": (ran.stdout or "")[-1500:]})
    d = diagnose(Run(ran.ranks)) if ran.ranks else None
    return {"setup": name, "load": load, "loop_s": loop_seconds(ran.stdout or ""), "per_step": confirm.per_step(ran),
            "returncode": ran.returncode, "failures": failures,
            "findings": [{"cause": f.cause, "seconds": f.seconds, "window_share": f.window_share, "status": f.status,
                          "change": f.change, "knob": f.knob} for f in d.findings] if d else [],
            "notes": d.notes if d else [], "knobs_planned": [k.name for k in confirm.plan(d, Run(ran.ranks))]
            if d and name == "all" else None}


def summary(runs: dict) -> dict:
    base = [x["loop_s"] for x in runs["all"]]
    saved = {}
    for name in SETUPS:
        if name != "all":
            cmp = spread.compare_rounds(base, [x["loop_s"] for x in runs[name]])
            saved[name] = {"compare": cmp, "verdict": confirm.verdict(cmp), "removes": REMOVES[name]}
    by_hand = sorted((n for n in saved if n.startswith("by hand")), key=lambda n: saved[n]["compare"]["median_ratio"])
    ranked = []   # diagnose's order of the planted causes in each "all" run (find_unused: a note, no seconds)
    for x in runs["all"]:
        order = [f["cause"] for f in x["findings"]]
        ranked.append([c for c in order if c in CAUSES.values()])
    planted = set(CAUSES.values()) | {C.LATENCY, C.EXPOSED}
    unplanted = [[f["cause"] for f in x["findings"] if f["cause"] not in planted]
                 for x in runs["all"]]
    replanted = {n: [f["change"] for x in runs[n] for f in x["findings"] if any(w in f["change"] for w in words)]
                 for n, words in REPLANTS.items()}
    return {"saved": saved, "measured_order": [REMOVES[n] for n in by_hand], "diagnose_order": ranked,
            "unplanted_findings": unplanted, "replanting_advice": replanted}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--record", metavar="NAME", help="save as data/runs/NAME.json")
    a = p.parse_args()
    cmd = knobs_command()
    runs, elapsed = interleaved(SETUPS, a.rounds, lambda name: one(cmd, name))
    res = {"runs": runs, "summary": summary(runs), "elapsed_s": elapsed}
    s = res["summary"]
    for n, v in s["saved"].items():
        print(f"{n:38s} {v['verdict']}")
    print("measured order:", s["measured_order"], "\ndiagnose's order per round:", s["diagnose_order"],
          "\nunplanted findings:", s["unplanted_findings"], "\nre-planting advice:", s["replanting_advice"])
    if a.record:
        rec = records.make_record("planted-knobs", {"script": "benchmarks/planted_knobs.py", "command": cmd,
                                                    "setups": SETUPS, **vars(a)}, res, backend="gloo")
        print("saved", records.save(rec, a.record, runs_dir=records.RUNS_DIR, overwrite=True))


if __name__ == "__main__":
    main()
