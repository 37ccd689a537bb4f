"""What the doctor costs a training loop: the same command with and without it, paired round by round.

The workload is benchmarks/workloads/knobs.py with every planted cause removed (a plain DDP step:
default bucket cap, batches decoded once, find_unused_parameters off), on 2 gloo ranks under
torchrun; each run's loop is timed by the workload's own clock (`loop_s`, from a barrier before the
loop to one after it), so the doctor's hooks are inside what is measured and its start-up is not.
Rounds alternate which command runs first (A B, B A, ...). Saves a record (kind "doctor-cost").

    PYTHONPATH=$PWD/src python3 benchmarks/doctor_cost.py --rounds 7 --record doctor-cost-cpu2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess

from ddp_lessons.tool import records, spread
from ddp_lessons.tool.doctor import command

from benchlib.rounds import interleaved, knobs_command  # this folder is on the path: run as a script

TIMEOUT_S = 120.0   # a run takes seconds; past this it hangs
PLAIN = ["--bucket-cap-mb", "25", "--predecode", "--find-unused", "0"]


def loop_seconds(stdout: str) -> float | None:
    """The workload's own `loop_s` from its KNOBS line (None where it did not print one)."""
    for line in stdout.splitlines():
        if line.startswith("KNOBS "):
            return json.loads(line[len("KNOBS "):])["loop_s"]
    return None


def run_once(which: str, cmd: list[str], tries: int = 3) -> dict:
    """One run, with or without the doctor; a run that fails or hangs (gloo can abort or stall a rank at
    exit now and then) is made again, up to `tries` times, and counted."""
    failures = 0
    for _ in range(tries):
        load = os.getloadavg()[0]
        if which == "doctor":
            ran = command.run(cmd, capture=True, timeout=TIMEOUT_S)
            out, hooks = ran.stdout or "", [r.get("doctor", {}).get("hook_s") for r in ran.ranks]
        else:
            out, hooks = _plain(cmd), None
        if loop_seconds(out) is not None:
            break
        failures += 1
    return {"loop_s": loop_seconds(out), "load": load, "hook_s": hooks, "failures": failures}


def _plain(cmd) -> str:
    """The command as it is, its output; stopped with everything it started past TIMEOUT_S."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        return proc.communicate(timeout=TIMEOUT_S)[0]
    except subprocess.TimeoutExpired:
        command._end(proc, grace=0.1)
        return ""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--record", metavar="NAME", help="save as data/runs/NAME.json")
    a = p.parse_args()
    cmd = knobs_command(*PLAIN)
    runs, elapsed = interleaved(["plain", "doctor"], a.rounds, lambda which: run_once(which, cmd))
    cmp = spread.compare_rounds([x["loop_s"] for x in runs["plain"]], [x["loop_s"] for x in runs["doctor"]])
    res = {"runs": runs, "compare": cmp, "elapsed_s": elapsed,
           "median_cost": cmp["median_ratio"] - 1 if cmp["median_ratio"] else None,
           "hook_s_median": statistics.median(h for x in runs["doctor"] for h in x["hook_s"] or [] if h is not None)}
    print(f"doctor / plain loop time per round: median {cmp['median_ratio']:.3f}, {cmp['min_ratio']:.3f} .. "
          f"{cmp['max_ratio']:.3f} over {cmp['rounds']} rounds: {cmp['verdict']}")
    if a.record:
        rec = records.make_record("doctor-cost", {"script": "benchmarks/doctor_cost.py", "command": cmd, **vars(a)},
                                  res, backend="gloo")
        print("saved", records.save(rec, a.record, runs_dir=records.RUNS_DIR, overwrite=True))


if __name__ == "__main__":
    main()
