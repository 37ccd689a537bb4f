"""Record notebook 07's GPU run: the workload of `ddp_lessons.cases.own` under DDP on
NCCL at world size 1 (one GPU), with the standard tools around it.

    PYTHONPATH=$PWD/src python3 benchmarks/record_own_run_gpu.py --out data/runs/own-run-h200x1
    PYTHONPATH=$PWD/src python3 benchmarks/record_own_run_gpu.py --out /tmp/own --quick   # CPU, gloo, seconds

What it writes into --out:
  record.json         a ddp_lessons.tool.records record (kind "own-run"): the machine,
                      the config, per-step and per-epoch timings of the broken and
                      fixed setups in interleaved rounds, the profiler's top
                      operators, the NCCL_DEBUG=INFO lines, `nvidia-smi topo -m`
                      and a filtered `nvidia-smi -q` (each None, with the reason,
                      where there is no NVIDIA GPU)
  trace/rank-0.json.gz  the torch.profiler trace (Chrome / Perfetto JSON, gzipped)
                      in the layout Holistic Trace Analysis reads: one file per
                      rank, the rank in the file's `distributedInfo`

The runs happen in a child interpreter with NCCL_DEBUG=INFO set before any
process group exists; its workers print into the child's stdout (the launcher's
`capture_output=False`), which this script reads: NCCL writes its INFO lines
there. On a machine without a GPU everything runs on gloo (no NCCL lines, no
CUDA activity in the trace).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

GPU = dict(width=32, train_size=2048, test_size=2048, epochs=2)
QUICK = dict(width=8, train_size=64, test_size=64, epochs=1)
TRACE = dict(wait=1, warmup=1, active=3)
NCCL_LINE = re.compile(r"NCCL (INFO|WARN)")
NCCL_PREFIX = re.compile(r"^\S+:\d+:\d+ (\[\d+\] NCCL)")   # "host:pid:tid [0] NCCL ...": no host name kept
HIDE = re.compile(r"Serial Number|UUID|Board Part Number|Board Id|GPU Part Number|Module ID|Bus Id|"
                  r"PCI Device/Vendor ID|PCI Sub System Id|Domain|Bus  |Device  ", re.IGNORECASE)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, metavar="DIR", help="folder for record.json and trace/")
    p.add_argument("--backend", choices=["nccl", "gloo"], default=None,
                   help="default: nccl when a GPU is visible, else gloo")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds of broken and fixed")
    p.add_argument("--quick", action="store_true", help="a tiny workload (the CPU test)")
    p.add_argument("--timeout", type=float, default=150.0, help="seconds for the child's runs")
    p.add_argument("--child", metavar="RESULT", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def child(args) -> None:
    """Inside the NCCL_DEBUG=INFO interpreter: the trace, then the timed rounds."""
    from ddp_lessons import launch
    from ddp_lessons.cases.own import trace, train
    from ddp_lessons.cases.own.options import Options
    size = QUICK if args.quick else GPU
    kw = dict(world_size=1, backend=args.backend, capture_output=False, progress=None, timeout=args.timeout)
    t0 = time.time()
    traced = launch(trace.profile_steps, args=(Options(**size), str(Path(args.out) / "trace")),
                    kwargs=TRACE, **kw)
    t1 = time.time()
    setups = {"broken": Options.broken(**size), "fixed": Options.fixed(**size)}
    timed = launch(train.rounds, args=(setups, args.rounds), **kw)
    Path(args.child).write_text(json.dumps({"trace": traced[0], "rounds": timed[0],
                                            "launch_s": {"trace": t1 - t0, "rounds": time.time() - t1}}))


def run_child(args, backend: str) -> tuple[dict | None, str, int]:
    result = Path(args.out) / ".child-result.json"
    cmd = [sys.executable, __file__, "--out", args.out, "--backend", backend, "--rounds", str(args.rounds),
           "--timeout", str(args.timeout), "--child", str(result)] + (["--quick"] if args.quick else [])
    env = {**os.environ, "NCCL_DEBUG": "INFO", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout + 60)
    out = proc.stdout + proc.stderr
    data = json.loads(result.read_text()) if result.exists() else None
    if result.exists():
        result.unlink()
    return data, out, proc.returncode


def nvidia_smi(*cmd_args) -> dict:
    """The command's text, or None with the reason it is absent."""
    try:
        p = subprocess.run(["nvidia-smi", *cmd_args], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return {"text": None, "reason": "no nvidia-smi on this machine (no NVIDIA driver)"}
    except subprocess.TimeoutExpired:
        return {"text": None, "reason": "nvidia-smi did not answer within 30 s"}
    if p.returncode:
        return {"text": None, "reason": f"nvidia-smi exited {p.returncode}: {p.stderr.strip()[:300]}"}
    lines = [ln for ln in p.stdout.splitlines() if not HIDE.search(ln)]   # no serials, ids, bus addresses
    return {"text": "\n".join(lines), "reason": None}


def summary(rounds: dict) -> dict:
    """Per setup and round: wall, train and eval seconds of rank 0, median step (s)."""
    from ddp_lessons.tool.spread import summary as stats
    out = {}
    for name, runs in rounds["runs"].items():
        rows = []
        for r in runs:
            steps = [s["step_time"] for s in r["timer"]["steps"][2:]]
            rows.append({"wall_s": r["wall_s"], "train_s": sum(e["train_s"] for e in r["epochs"]),
                         "eval_s": sum(e["eval_s"] for e in r["epochs"]),
                         "median_step_s": stats(steps)["median"] if steps else None})
        out[name] = rows
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args)
        return 0
    from ddp_lessons.tool import records
    from ddp_lessons.tool.launcher import visible_gpus
    backend = args.backend or ("nccl" if visible_gpus() else "gloo")
    out = Path(args.out)
    (out / "trace").mkdir(parents=True, exist_ok=True)
    for old in (out / "trace").glob("*"):
        old.unlink()   # HTA reads every trace in the folder: only this run's
    t0 = time.time()
    data, text, rc = run_child(args, backend)
    nccl = [NCCL_PREFIX.sub(r"\1", ln) for ln in text.splitlines() if NCCL_LINE.search(ln)]
    if data is None:
        print(text[-4000:], file=sys.stderr)
        print(f"the child run failed (exit {rc}): nothing recorded", file=sys.stderr)
        return 1
    size = QUICK if args.quick else GPU
    results = {"trace": {**data["trace"], "trace": f"trace/{Path(data['trace']['trace']).name}"},
               "rounds": data["rounds"], "summary": summary(data["rounds"]), "launch_s": data["launch_s"],
               "nccl_debug": {"lines": nccl[:600], "count": len(nccl),
                              "reason": None if nccl else f"no NCCL lines: the backend was {backend}"},
               "nvidia_smi_topo": nvidia_smi("topo", "-m"), "nvidia_smi_q": nvidia_smi("-q")}
    config = {"workload": size, "trace_schedule": TRACE, "rounds": args.rounds, "world_size": 1,
              "backend": backend, "setups": ["broken", "fixed"]}
    rec = records.make_record("own-run", config, results, backend=backend)
    path = records.save(rec, "record", runs_dir=out, overwrite=True)
    trace_bytes = sum(p.stat().st_size for p in (out / "trace").glob("*.gz"))
    print(f"saved {path} ({path.stat().st_size / 1e3:.0f} kB) and {len(list((out / 'trace').glob('*.gz')))} "
          f"trace(s), {trace_bytes / 1e6:.2f} MB, in {time.time() - t0:.0f} s; {len(nccl)} NCCL lines")
    for name, rows in results["summary"].items():
        print(name, [{k: round(v, 4) if v else v for k, v in r.items()} for r in rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
