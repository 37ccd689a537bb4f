"""Does the doctor name a slower rank on GPUs, and charge it what was planted? benchmarks/workloads/gpu_mlp.py
on 2 ranks (NCCL where there are 2 GPUs, else gloo with both ranks on one GPU: gloo all-reduces CUDA
tensors through the host), rank 1 `--slow-ms` slower in every forward (its host asleep; then its GPU kept
busy), and without it;
each under the doctor (mode "light": DDP's own all-reduce, each step's compute end marked from an autograd
callback, no per-step host-device synchronise). Prints the waiting finding and rank 0's waited seconds
against the planted seconds; saves a record (kind "doctor-straggler").

    PYTHONPATH=$PWD/src python3 benchmarks/doctor_straggler.py --record doctor-straggler-h100x1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddp_lessons import Run, diagnose
from ddp_lessons.tool import records
from ddp_lessons.tool.diagnosis.causes import JITTER, WAITING
from ddp_lessons.tool.doctor import command

WORKLOAD = Path(__file__).resolve().parent / "workloads" / "gpu_mlp.py"


def one(slow_ms: float, steps: int, backend: str, where: str = "host") -> dict:
    torchrun = str(Path(sys.executable).parent / "torchrun")
    cmd = [torchrun, "--standalone", "--nproc_per_node", "2", str(WORKLOAD), "--backend", backend, "--width", "512",
           "--depth", "4", "--batch", "512", "--steps", str(steps), "--slow-rank", "1", "--slow-ms", str(slow_ms),
           "--slow-on", where]
    # --steps: the doctor stops the run after them and profiles 5 more for the GPU's busy share
    ran = command.run(cmd, steps=steps - 20, capture=True, timeout=300, profile=5)
    if len(ran.ranks) < 2:
        return {"slow_ms": slow_ms, "error": f"{len(ran.ranks)} rank(s) timed, exit {ran.returncode}",
                "stdout": (ran.stdout or "")[-2000:]}
    run = Run(ran.ranks)   # the waits across the ranks are the run's steps' (the doctor's ranks took none)
    d = diagnose(run)
    wait = d.finding(WAITING)
    n = len(run[0].steps())
    return {"slow_ms": slow_ms, "slow_on": where, "steps": n, "planted_s": slow_ms * 1e-3 * n,
            "busy": [r.get("doctor", {}).get("busy") for r in ran.ranks],
            "comm_source": ran.ranks[0].get("comm_source"), "mode": ran.ranks[0].get("mode"),
            "causes": d.causes, "waiting": None if wait is None else {"seconds": wait.seconds, "detail": wait.detail,
                                                                        "per_rank": wait.per_rank},
            "jitter_s": (d.finding(JITTER) or wait or d).seconds if d.finding(JITTER) else 0.0,
            "waited_rank0_s": sum(s.wait or 0.0 for s in run[0].steps()),
            "steps_with_wait": sum(s.wait is not None for s in run[0].steps()), "n_steps": n,
            "diagnosis": str(d)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--slow-ms", type=float, default=2.0)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--record", metavar="NAME")
    a = p.parse_args()
    import torch
    backend = "nccl" if torch.cuda.device_count() >= 2 else "gloo"
    # two ranks on one GPU share it in time slices: a GPU-side plant slows the other's kernels too, so the
    # host-side plant (the rank's device idles) is the clean one there; both run
    res = {"backend": backend, "gpus": torch.cuda.device_count(),
           "planted": one(a.slow_ms, a.steps, backend, "host"), "none": one(0.0, a.steps, backend),
           "planted_gpu": one(a.slow_ms, a.steps, backend, "gpu")}
    for k in ("planted", "none", "planted_gpu"):
        r = res[k]
        print(k, {x: r.get(x) for x in ("causes", "planted_s", "waited_rank0_s", "steps_with_wait", "n_steps",
                                       "comm_source", "busy", "error")}, flush=True)
        print(r.get("diagnosis", ""), flush=True)
    if a.record:
        rec = records.make_record("doctor-straggler", {"script": "benchmarks/doctor_straggler.py", **vars(a)}, res,
                                  backend=backend)
        print("saved", records.save(rec, a.record, runs_dir=records.RUNS_DIR, overwrite=True))


if __name__ == "__main__":
    main()
