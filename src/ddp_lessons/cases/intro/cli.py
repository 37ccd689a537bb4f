"""The foundation's commands: info, hello, allreduce, train-mlp, error-demos.
Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import json

from ...tool import allreduce, commands, records
from ...tool.launcher import launch, visible_gpus
from ...tool.runs import Rank
from . import train, workers
from .options import Options, Sweep


def info_command(p):
    def run(args):
        info = records.machine_info()
        info["topology"] = records.gpu_topology()
        print(json.dumps(info, indent=1))
    return run


def hello_command(p):
    commands.common(p)

    def run(args):
        out = commands.run_workers(args, workers.hello)
        if out is not None:
            for r in out:
                print(f"rank {r['rank']}/{r['world_size']} {r['backend']}: sum={r['sum']:g}")
            commands.save_record(args, "hello", {"world_size": len(out)}, list(out), backend=out[0]["backend"])
    return run


def allreduce_command(p):
    commands.common(p)
    p.add_argument("--min-bytes", type=int, default=Sweep().lo)
    p.add_argument("--max-bytes", type=int, default=64 * 2**20)
    p.add_argument("--iters", type=int, default=Sweep().iters)
    p.add_argument("--warmup", type=int, default=Sweep().warmup)

    def run(args):
        sweep = Sweep(lo=args.min_bytes, hi=args.max_bytes, iters=args.iters, warmup=args.warmup)
        sizes = sweep.sizes()
        out = commands.run_workers(args, allreduce.sweep, (sizes, sweep.iters, sweep.warmup))
        if out is None:
            return
        rows = allreduce.summarize(out)
        fit = allreduce.fit_latency_bandwidth(rows)
        for r in rows:
            print(f"{r['bytes']:>12d} B  {r['time'] * 1e6:10.1f} us (best {r['best'] * 1e6:9.1f})  "
                  f"algbw {r['algbw'] / 1e9:7.2f} GB/s  busbw {r['busbw'] / 1e9:7.2f} GB/s")
        print(allreduce.describe_fit(fit) + f"; it misses some size by up to {fit['max_rel_error']:.0%}")
        commands.save_record(args, "allreduce", {"sizes": sizes, "iters": args.iters, "warmup": args.warmup,
                                                 "world_size": len(out)},
                             {"ranks": out, "rows": rows, "fit": fit}, backend=out[0]["backend"])
    return run


def train_mlp_command(p):
    commands.common(p)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--untimed", action="store_true", help="run with the timer disabled")

    def run(args):
        o = Options(steps=args.steps, width=args.width, depth=args.depth, batch=args.batch, timed=not args.untimed)
        out = commands.run_workers(args, train.train, (o,))
        if out is None:
            return
        for r in out:
            m = Rank(r).median_step() if r["steps"] else {}
            print(f"rank {r['rank']}: " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in m.items()
                                                   if k in ("step_time", "allreduce", "exposed")))
        commands.save_record(args, "train-mlp", vars(args) | {"record": None}, out)
    return run


def error_demos_command(p):
    commands.record_args(p)

    def run(args):
        """The launcher's refusals as a learner meets them on a GPU machine."""
        import torch
        demos = {}

        def attempt(name, **kw):
            try:
                launch(workers.hello, **kw)
                demos[name] = "no error"
            except Exception as exc:  # noqa: BLE001 - recorded as seen
                demos[name] = f"{type(exc).__name__}: {exc.summary if hasattr(exc, 'summary') else exc}"
            print(f"{name}: {demos[name]}")
        n = visible_gpus("fork")  # an NVML count: leaves this process fork-safe
        attempt("too_many_nccl_ranks", world_size=n + 1, backend="nccl")
        attempt("fork_before_cuda", world_size=max(n, 1), start_method="fork")
        demos["cuda_is_available"] = torch.cuda.is_available()  # the CUDA driver starts here
        attempt("fork_after_is_available", world_size=max(n, 1), start_method="fork")
        if n:
            torch.zeros(1, device="cuda")  # torch's CUDA state now initialised
        attempt("fork_after_cuda", world_size=max(n, 1), start_method="fork")
        args.backend = "nccl" if n else "gloo"
        commands.save_record(args, "error-demos", {"gpus": n}, demos)
    return run
