"""What the doctor costs a training loop: the same command with and without it, paired round by round.

CPU (default): benchmarks/workloads/knobs.py with every planted cause removed (a plain DDP step: default
bucket cap, batches decoded once, find_unused_parameters off), on 2 gloo ranks under torchrun; each run's
loop is timed by the workload's own clock (`loop_s`, from a barrier before the loop to one after it).

GPU (`--cuda`): benchmarks/workloads/gpu_mlp.py under torchrun with NCCL on every visible GPU, at each
`--config` WIDTHxDEPTHxBATCH (steps of 1 to 5 ms: a narrow deep MLP whose step the host paces, a wide one
the GPU does); the reading is the script's own median step time over windows of 50 steps. Arms: the
command alone and under the doctor (whole runs: no --steps, so no profiled steps after them).
The doctor's own report of its cost (its hooks' host time over its window) is kept beside each round, to
be set against the paired measurement.

Rounds alternate which command runs first (A B, B A, ...). Each round is appended to `--log` as it ends,
so a run cut short keeps what it measured. Saves a record (kind "doctor-cost").

    PYTHONPATH=$PWD/src python3 benchmarks/doctor_cost.py --rounds 7 --record doctor-cost-cpu2
    PYTHONPATH=$PWD/src python3 benchmarks/doctor_cost.py --cuda --rounds 7 --record doctor-cost-h100x1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ddp_lessons.tool import records, spread
from ddp_lessons.tool.doctor import command

from benchlib.rounds import interleaved, knobs_command  # this folder is on the path: run as a script

TIMEOUT_S = 120.0   # a run takes seconds; past this it hangs
PLAIN = ["--bucket-cap-mb", "25", "--predecode", "--find-unused", "0"]
GPU_WORKLOAD = Path(__file__).resolve().parent / "workloads" / "gpu_mlp.py"
GPU_CONFIGS = ("256x8x256", "2048x4x1536", "256x2x256")


def marked(stdout: str, tag: str) -> dict | None:
    """The workload's `TAG {json}` line (None where it did not print one)."""
    for line in stdout.splitlines():
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    return None


def loop_seconds(stdout: str) -> float | None:
    """The knobs workload's own `loop_s` from its KNOBS line (None where it did not print one)."""
    d = marked(stdout, "KNOBS")
    return d["loop_s"] if d else None


def self_cost(ranks) -> dict:
    """The doctor's own account of its cost, rank by rank: its hooks' host time (and its comm hook's) over
    its window (the run from its first step)."""
    out = []
    for r in ranks:
        d, acc = r.get("doctor") or {}, r.get("account") or {}
        window = (acc.get("wall") or 0.0) - (acc.get("before_first_step") or 0.0)
        hook = sum(s.get("hook_time") or 0.0 for s in r.get("steps") or [])
        if window > 0:
            own = (d.get("hook_s") or 0.0) + (d.get("untimed_s") or 0.0) + hook
            out.append({"hook_s": d.get("hook_s"), "untimed_s": d.get("untimed_s"), "comm_hook_s": hook,
                        "window_s": window, "share": own / window, "busy": d.get("busy")})
    return {"ranks": out, "share": max((x["share"] for x in out), default=None)}


def run_once(which: str, cmd: list[str], tag: str, key: str, tries: int = 3) -> dict:
    """One run, as it is or under the doctor; a run that fails or hangs is made again, up to `tries` times,
    and counted."""
    failures, out, extra = 0, "", {}
    for _ in range(tries):
        load = os.getloadavg()[0]
        if which.startswith("doctor"):
            ran = command.run(cmd, capture=True, timeout=TIMEOUT_S)
            out, extra = ran.stdout or "", self_cost(ran.ranks)
        else:
            out = _plain(cmd)
        if (marked(out, tag) or {}).get(key) is not None:
            break
        failures += 1
    reading = marked(out, tag) or {}
    return {key: reading.get(key), "reading": reading, "load": load, "doctor": extra, "failures": failures}


def _plain(cmd) -> str:
    """The command as it is, its output; stopped with everything it started past TIMEOUT_S."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        return proc.communicate(timeout=TIMEOUT_S)[0]
    except subprocess.TimeoutExpired:
        command.stop(proc, grace=0.1)
        return ""


def gpu_command(config: str, nproc: int, steps: int | None = None) -> list[str]:
    width, depth, batch = (int(x) for x in config.split("x"))
    torchrun = str(Path(sys.executable).parent / "torchrun")
    return [torchrun, "--standalone", "--nproc_per_node", str(nproc), str(GPU_WORKLOAD), "--width", str(width),
            "--depth", str(depth), "--batch", str(batch)] + (["--steps", str(steps)] if steps else [])


def summarise(runs: dict, key: str) -> dict:
    """Each doctor arm against the command alone: the paired cost, and the doctor's own account of it."""
    out = {}
    for arm in (a for a in runs if a != "plain"):
        cmp = spread.compare_rounds([x[key] for x in runs["plain"]], [x[key] for x in runs[arm]])
        said = [x["doctor"].get("share") for x in runs[arm] if x["doctor"].get("share") is not None]
        cost = cmp["median_ratio"] - 1 if cmp["median_ratio"] else None
        said_med = statistics.median(said) if said else None
        lo, hi = (cmp["min_ratio"] - 1, cmp["max_ratio"] - 1) if cmp["rounds"] else (None, None)
        ci = spread.median_interval(cmp["ratios"])
        ci = [ci[0] - 1, ci[1] - 1] if ci else None
        out[arm] = {"compare": cmp, "median_cost": cost, "cost_range": [lo, hi], "median_cost_95": ci,
                    "self_reported": said_med,
                    "self_within_spread": None if said_med is None or lo is None else lo <= said_med <= hi,
                    "self_within_95": None if said_med is None or ci is None else ci[0] <= said_med <= ci[1]}
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--cuda", action="store_true", help="the GPU workload on every visible GPU, NCCL")
    p.add_argument("--config", action="append", help="GPU: WIDTHxDEPTHxBATCH (repeat; default: " +
                   ", ".join(GPU_CONFIGS) + ")")
    p.add_argument("--budget-s", type=float, default=None, help="GPU: start no round past this many seconds")
    p.add_argument("--workload-steps", type=int, default=None, help="GPU: the workload's steps a run (default its 600)")
    p.add_argument("--log", metavar="FILE", help="append each round's readings here as JSON lines")
    p.add_argument("--parts", metavar="FILE",
                   help="benchmarks/doctor_parts.py's output on this machine, kept in the record")
    p.add_argument("--record", metavar="NAME", help="save as data/runs/NAME.json")
    a = p.parse_args()
    t0 = time.time()
    if not a.cuda:
        cmd = knobs_command(*PLAIN)
        runs, elapsed = interleaved(["plain", "doctor"], a.rounds, lambda w: run_once(w, cmd, "KNOBS", "loop_s"))
        res = {"runs": runs, "arms": summarise(runs, "loop_s"), "elapsed_s": elapsed}
        config: dict = {"command": cmd}
    else:
        import torch
        nproc, res, config = torch.cuda.device_count(), {"configs": {}}, {"configs": a.config or list(GPU_CONFIGS)}
        for cfg in config["configs"]:
            if a.budget_s and time.time() - t0 > a.budget_s:
                break
            cmd = gpu_command(cfg, nproc, a.workload_steps)
            arms = ["plain", "doctor"]
            runs, elapsed = interleaved(arms, a.rounds, lambda w, cmd=cmd, cfg=cfg: _logged(
                a.log, cfg, w, run_once(w, cmd, "GPU_MLP", "step_s")), key="step_s",
                deadline=t0 + a.budget_s if a.budget_s else None)
            res["configs"][cfg] = {"command": cmd, "runs": runs, "arms": summarise(runs, "step_s"),
                                   "elapsed_s": elapsed}
            print(cfg, json.dumps({k: v["median_cost"] for k, v in res["configs"][cfg]["arms"].items()}), flush=True)
        config["gpus"] = nproc
    print(json.dumps(_brief(res), indent=1))
    if a.parts:
        with open(a.parts) as f:
            res["parts"] = json.load(f)
    if a.record:
        rec = records.make_record("doctor-cost", {"script": "benchmarks/doctor_cost.py", **config, **vars(a)},
                                  res, backend="nccl" if a.cuda else "gloo")
        print("saved", records.save(rec, a.record, runs_dir=records.RUNS_DIR, overwrite=True))


def _logged(path, cfg, which, reading):
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"config": cfg, "arm": which, **reading}, default=str) + "\n")
    return reading


def _brief(res) -> dict:
    arms = res.get("arms") or {c: v["arms"] for c, v in res.get("configs", {}).items()}
    return json.loads(json.dumps(arms, default=str))


if __name__ == "__main__":
    main()
