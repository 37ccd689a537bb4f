"""`python -m ddp_lessons COMMAND`: the course's runs from a shell.

Each command runs the same worker functions as the notebooks, two ways:
  python -m ddp_lessons allreduce --nproc 2            # starts 2 workers itself
  torchrun --standalone --nproc_per_node 2 -m ddp_lessons allreduce
Under torchrun `--nproc` is ignored: torchrun's WORLD_SIZE wins. Rank 0
prints the summary and, with `--record NAME`, saves a run record to data/runs/.
Case modules add their own commands (see `COMMANDS`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from . import bench, records, runtime, toy

# command -> "module:function" that adds the command's arguments and returns its runner
COMMANDS = {
    "info": "ddp_lessons.cli:_info_command",
    "hello": "ddp_lessons.cli:_hello_command",
    "allreduce": "ddp_lessons.cli:_allreduce_command",
    "train-mlp": "ddp_lessons.cli:_train_mlp_command",
    "error-demos": "ddp_lessons.cli:_error_demos_command",
    "case1": "ddp_lessons.case1_cli:cli_command",
    "make-vqa-data": "ddp_lessons.vqa_data:cli_command",
    "case2": "ddp_lessons.case2_cli:cli_command",
}


def common(p: argparse.ArgumentParser) -> None:
    """Arguments every multi-process command takes."""
    p.add_argument("--nproc", type=int, default=2, help="workers to start (ignored under torchrun)")
    p.add_argument("--backend", choices=["gloo", "nccl"], default=None, help="default: NCCL if GPUs, else gloo")
    p.add_argument("--record", metavar="NAME", help="save a run record as data/runs/NAME.json")
    p.add_argument("--overwrite", action="store_true", help="replace an existing record")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds for the whole run")


def run_workers(args, fn, fn_args=()):
    """Run `fn` on every rank (launch or torchrun); rank 0 gets the list, others None."""
    kwargs = {} if runtime.under_torchrun() else {"timeout": args.timeout}
    return runtime.run(fn, fn_args, world_size=args.nproc, backend=args.backend, **kwargs)


def save_record(args, kind, config, results, **extra):
    if results is None or not getattr(args, "record", None):
        return None
    backend = extra.pop("backend", None) or args.backend
    rec = records.make_record(kind, config, results, backend=backend, **extra)
    if rec["machine"]["gpus"]:
        rec["machine"]["topology"] = records.gpu_topology()
    path = records.save(rec, args.record, overwrite=args.overwrite)
    print(f"saved {path}")
    return path


def _info_command(p):
    def run(args):
        info = records.machine_info()
        info["topology"] = records.gpu_topology()
        print(json.dumps(info, indent=1))
    return run


def _hello_command(p):
    common(p)

    def run(args):
        out = run_workers(args, toy.hello)
        if out is not None:
            for r in out:
                print(f"rank {r['rank']}/{r['world_size']} {r['backend']}: sum={r['sum']:g}")
    return run


def _allreduce_command(p):
    common(p)
    p.add_argument("--min-bytes", type=int, default=4 * 1024)
    p.add_argument("--max-bytes", type=int, default=64 * 2**20)
    p.add_argument("--iters", type=int, default=20)

    def run(args):
        sizes = bench.default_sizes(args.min_bytes, args.max_bytes)
        out = run_workers(args, bench.allreduce_sweep, (sizes, args.iters))
        if out is None:
            return
        rows = bench.summarize(out)
        fit = bench.fit_latency_bandwidth(rows)
        for r in rows:
            print(f"{r['bytes']:>12d} B  {r['time'] * 1e6:10.1f} us  algbw {r['algbw'] / 1e9:7.2f} GB/s  busbw {r['busbw'] / 1e9:7.2f} GB/s")
        print(f"fit: latency {fit['latency'] * 1e6:.1f} us, bandwidth {fit['bandwidth'] / 1e9:.2f} GB/s (algbw)")
        save_record(args, "allreduce", {"sizes": sizes, "iters": args.iters, "world_size": len(out)},
                    {"ranks": out, "rows": rows, "fit": fit}, backend=out[0]["backend"])
    return run


def _train_mlp_command(p):
    common(p)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--untimed", action="store_true", help="run with the timer disabled")

    def run(args):
        out = run_workers(args, toy.train_mlp, (args.steps, args.width, args.depth, args.batch,
                                                 25.0, not args.untimed))
        if out is None:
            return
        from .timing import median_step
        for r in out:
            m = median_step(r) if r["steps"] else {}
            print(f"rank {r['rank']}: " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in m.items()
                                                   if k in ("step_time", "allreduce", "exposed")))
        save_record(args, "train-mlp", vars(args) | {"record": None}, out)
    return run


def _error_demos_command(p):
    p.add_argument("--record", metavar="NAME")
    p.add_argument("--overwrite", action="store_true")

    def run(args):
        """The launcher's refusals as a learner meets them on a GPU machine."""
        import torch
        from .launch import launch
        demos = {}

        def attempt(name, **kw):
            try:
                launch(toy.hello, **kw)
                demos[name] = "no error"
            except Exception as exc:  # noqa: BLE001 - recorded as seen
                demos[name] = f"{type(exc).__name__}: {exc.summary if hasattr(exc, 'summary') else exc}"
            print(f"{name}: {demos[name]}")
        from .launch import visible_gpus
        n = visible_gpus("fork")  # an NVML count: leaves this process fork-safe
        attempt("too_many_nccl_ranks", world_size=n + 1, backend="nccl")
        attempt("fork_before_cuda", world_size=max(n, 1), start_method="fork")
        demos["cuda_is_available"] = torch.cuda.is_available()  # the CUDA driver starts here
        attempt("fork_after_is_available", world_size=max(n, 1), start_method="fork")
        if n:
            torch.zeros(1, device="cuda")  # torch's CUDA state now initialised
        attempt("fork_after_cuda", world_size=max(n, 1), start_method="fork")
        args.backend = "nccl" if n else "gloo"
        save_record(args, "error-demos", {"gpus": n}, demos)
    return run


def build_parser(chosen: str | None = None) -> tuple[argparse.ArgumentParser, dict]:
    """The parser; only the chosen command's module is imported (Lightning is slow to import)."""
    parser = argparse.ArgumentParser(prog="python -m ddp_lessons", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    runners = {}
    for name, target in COMMANDS.items():
        p = sub.add_parser(name)
        if name != chosen:
            continue
        mod, fn = target.split(":")
        try:
            runners[name] = getattr(importlib.import_module(mod), fn)(p)
        except ModuleNotFoundError as exc:  # a case whose extra dependency is missing
            if (exc.name or "").startswith("ddp_lessons"):
                raise
            runners[name] = _missing(exc)
    return parser, runners


def _missing(exc):
    def run(args):
        sys.exit(f"this command needs a package that is not installed ({exc}); run `make install`")
    return run


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser, runners = build_parser(chosen)
    args = parser.parse_args(argv)
    runners[args.command](args)
    return 0
