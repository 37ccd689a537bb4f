"""Does StepTimer stay out of the way on NCCL, and does it agree with the profiler?

One run answers it (`benchlib.timer_bench` is the worker, `timer_agree`
the checks, `timer_check` reads the record back). Parts, each its own launch:

  main   world size 1: modes builtin (DDP's C++ all-reduce, no timer), light,
         light_ddp (light with DDP's own timings read every step), full (per-bucket timing hook),
         pyhook (torch's allreduce_hook, no timer): --rounds interleaved rounds
         of --steps steps of case 2's step; paired overhead per round against
         builtin. Then --profile-steps steps of light and full under
         torch.profiler (NCCL kernel times against the timer's), flight-
         recorder durations against kernel times on AVG all-reduces of 4, 32
         and 256 MB (at world size 1 NCCL runs a kernel for AVG, none for an
         in-place SUM), and per-call costs.
  fr     builtin, light and light_ddp again with the flight recorder's ring set
         explicitly (TORCH_NCCL_TRACE_BUFFER_SIZE = TORCH_FR_BUFFER_SIZE = 2000;
         torch turns it on with 2000 entries by default since 2.6), and light
         under the profiler.
  wsN    world size N on N GPUs when there are more than one: as main.
  probe_timing_env, probe_no_event_cache
         the flight recorder with TORCH_NCCL_ENABLE_TIMING=1 set before the
         process group exists (and, second, without NCCL's event cache): is
         `duration_ms` filled at once, after the watchdog had 0.5 s, and for
         a group whose timing was turned on after it was made? The C++ log of
         the probe goes into the record (TORCH_CPP_LOG_LEVEL=INFO).

Nothing can crash it halfway: every part and every mode of a round runs in
try/except, the record is rewritten after each part, and no part starts (and
no round) past --budget-s seconds from the start.

    PYTHONPATH=$PWD/src python3 benchmarks/timer_validation.py --record timer-validation-h200x1 --out $OUT
    PYTHONPATH=$PWD/src python3 benchmarks/timer_validation.py --backend gloo --steps 20 --rounds 2
"""

import argparse
import contextlib
import json
import os
import tempfile
import sys
import time
from pathlib import Path

from ddp_lessons import launch
from ddp_lessons.tool import records
from ddp_lessons.tool.launcher import visible_gpus
from ddp_lessons.course.timer_validation.check import summarize_run, validation_summary

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchlib, for this process and its workers
from benchlib.timer_agree import fr_probe  # noqa: E402
from benchlib.timer_validate import validate  # noqa: E402

FR_ENV = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_FR_BUFFER_SIZE": "2000"}
LOG_WORDS = ("TORCH_NCCL_ENABLE_TIMING", "duration", "Flight", "TRACE_BUFFER", "EVENT_CACHE")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["nccl", "gloo"], default=None,
                   help="default: nccl when a GPU is visible, else gloo")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--profile-steps", type=int, default=50)
    p.add_argument("--probe-steps", type=int, default=100)
    p.add_argument("--budget-s", type=float, default=120.0, help="no part or round starts after this")
    p.add_argument("--cost-rounds", type=int, default=0,
                   help="first, the part 'cost': this many rounds of the default timer's parts and torch.profiler")
    p.add_argument("--cost-share", type=float, default=0.6, help="share of --budget-s the part 'cost' may take")
    p.add_argument("--cost-only", action="store_true", help="the part 'cost' alone")
    p.add_argument("--record", metavar="NAME", help="save as data/runs/NAME.json")
    p.add_argument("--out", metavar="DIR", help="also write the record into DIR (e.g. $OUT)")
    return p.parse_args()


class Run:
    def __init__(self, args):
        self.args, self.t0 = args, time.time()
        self.gpus = visible_gpus()
        self.backend = args.backend or ("nccl" if self.gpus else "gloo")
        self.results = {"runs": {}, "probes": {}, "skipped": []}
        self.name = args.record or f"timer-validation-{self.backend}"

    def left(self):
        return self.args.budget_s - (time.time() - self.t0)

    def cfg(self, modes, agree_modes, share, partial, rounds=None):
        a = self.args
        return {"steps": a.steps, "rounds": rounds or a.rounds, "warmup": a.warmup, "batch": a.batch,
                "width": 256, "depth": 3, "modes": modes, "agree_modes": agree_modes,
                "profile_steps": a.profile_steps, "probe_steps": a.probe_steps, "probe_fill": 2000,
                "deadline": time.time() + share * a.budget_s, "extra_s": 0.15 * a.budget_s,
                "partial": partial}

    def part(self, name, ws, modes, agree_modes, share, env=None, rounds=None):
        if self.left() < 10:
            self.results["skipped"].append(f"{name}: time budget reached")
            return
        partial = os.path.join(tempfile.mkdtemp(prefix="timer-validation-"), "rank0.json")
        run = {"world_size": ws, "env_set": env or {}, "modes": modes}
        t = time.time()
        try:
            with _env(env or {}):
                outs = launch(validate, (self.cfg(modes, agree_modes, share, partial, rounds),), world_size=ws,
                              backend=self.backend, timeout=max(10.0, self.left()), progress=None)
            run.update(ranks=outs, summary=summarize_run(outs))
            run.update({k: outs[0].get(k) for k in ("agreement", "fr_kernels", "micro", "notes", "gpu", "nccl")})
        except Exception as exc:  # noqa: BLE001 - recorded, the next part runs
            run["error"] = f"{type(exc).__name__}: {exc}"[:4000]
            if os.path.exists(partial):
                outs = [json.loads(Path(partial).read_text())]
                run.update(ranks=outs, summary=summarize_run(outs), incomplete=True)
        run["wall_s"] = time.time() - t
        self.results["runs"][name] = run
        self.save()

    def probe(self, name, env):
        if self.left() < 10:
            self.results["skipped"].append(f"{name}: time budget reached")
            return
        cfg = self.cfg(["builtin"], [], 0.0, None)
        p = {"env_set": env}
        t = time.time()
        try:
            with _env(dict(env, TORCH_CPP_LOG_LEVEL="INFO")), _stderr_to_file() as log:
                p["worker"] = launch(fr_probe, (cfg,), world_size=1, backend=self.backend,
                                     timeout=max(10.0, self.left()), progress=None,
                                     capture_output=False)[0]
        except Exception as exc:  # noqa: BLE001 - recorded
            p["error"] = f"{type(exc).__name__}: {exc}"[:4000]
        p["log"] = [ln[:300] for ln in Path(log.name).read_text(errors="replace").splitlines()
                    if any(w in ln for w in LOG_WORDS)][:20]
        os.unlink(log.name)
        p["wall_s"] = time.time() - t
        self.results["probes"][name] = p
        self.save()

    def save(self):
        a = self.args
        self.results["elapsed_s"] = time.time() - self.t0
        rec = records.make_record("timer_validation", {**vars(a), "backend": self.backend, "gpus": self.gpus},
                                  self.results, backend=self.backend)
        if a.record:
            records.save(rec, a.record, runs_dir=records.RUNS_DIR, overwrite=True)
        if a.out:
            records.save(rec, Path(a.out).resolve() / f"{self.name}.json", overwrite=True)
        self.record = rec


@contextlib.contextmanager
def _env(updates):
    old = {k: os.environ.get(k) for k in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _stderr_to_file():
    """Workers started now write their stderr (fd 2, C++ logs included) to a file."""
    f = tempfile.NamedTemporaryFile("w+b", prefix="timer-validation-", suffix=".log", delete=False)
    saved = os.dup(2)
    os.dup2(f.fileno(), 2)
    try:
        yield f
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        f.close()


def main():
    args = parse_args()
    r = Run(args)
    all_modes = ["builtin", "light", "light_ddp", "full", "pyhook"]
    gloo = r.backend == "gloo"
    if args.cost_rounds:
        # what the default timer costs, and where: its marks alone, with the recorder, DDP's timings every
        # step, against torch.profiler; --cost-rounds interleaved rounds, paired against builtin
        cost = ["builtin", "light", "light_marks", "light_fr", "light_ddp", "profiler"]
        r.part("cost", 2 if gloo else 1, cost, [], args.cost_share, rounds=args.cost_rounds)
    if args.cost_only:
        r.save()
        return _report(args, r)
    r.part("main", 2 if gloo else 1, all_modes, ["light", "full"], 0.35)
    r.part("fr", 2 if gloo else 1, ["builtin", "light", "light_ddp"], ["light"], 0.25, FR_ENV)
    if not gloo and r.gpus > 1:
        r.part(f"ws{r.gpus}", r.gpus, all_modes, ["light", "full"], 0.2)
    r.probe("probe_timing_env", dict(FR_ENV, TORCH_NCCL_ENABLE_TIMING="1"))
    r.probe("probe_no_event_cache", dict(FR_ENV, TORCH_NCCL_ENABLE_TIMING="1", TORCH_NCCL_CUDA_EVENT_CACHE="0"))
    r.save()
    _report(args, r)


def _report(args, r):
    for row in validation_summary(r.record):
        print(json.dumps(row, default=str))
    where = [p for p in (args.record and f"data/runs/{args.record}.json",
                         args.out and str(Path(args.out).resolve() / f"{r.name}.json")) if p]
    print(f"elapsed {time.time() - r.t0:.1f} s; record: {', '.join(where) or 'not saved (no --record, no --out)'}")


if __name__ == "__main__":
    main()
