"""What every multi-process command of `python -m ddp_lessons` shares: the
common arguments, running a worker on every rank (launch or torchrun), and
saving a run record from rank 0. Commands in `intro`, `case1` and `case2`
import this; `cli` imports them by name.
"""

from __future__ import annotations

import argparse

from . import records, runtime
from .launcher import run


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
    return run(fn, fn_args, world_size=args.nproc, backend=args.backend, **kwargs)


def save_record(args, kind, config, results, **extra):
    if results is None or not getattr(args, "record", None):
        return None
    backend = extra.pop("backend", None) or args.backend
    rec = records.make_record(kind, config, results, backend=backend, **extra)
    if rec["machine"]["gpus"]:
        rec["machine"]["topology"] = records.gpu_topology()
    path = records.save(rec, args.record, runs_dir=records.RUNS_DIR, overwrite=args.overwrite)
    print(f"saved {path}")
    return path


