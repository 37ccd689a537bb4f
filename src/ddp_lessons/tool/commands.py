"""What every multi-process command of `python -m ddp_lessons` shares: the
common arguments, running a worker on every rank (launch or torchrun), and
saving a run record from rank 0. Commands in `intro`, `case1` and `case2`
import this; `cli` imports them by name.
"""

from __future__ import annotations

import argparse

from . import records, runtime
from .launcher import run


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (argparse turns the error into a one-line usage message)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: use a whole number >= 1")
    return n


def positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = 0.0
    if not x > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: use a number of seconds > 0")
    return x


def record_args(p: argparse.ArgumentParser) -> None:
    """--record NAME and --overwrite; `check_record` refuses a taken name before any work."""
    p.add_argument("--record", metavar="NAME", help="save a run record as data/runs/NAME.json")
    p.add_argument("--overwrite", action="store_true", help="replace an existing record")


def common(p: argparse.ArgumentParser) -> None:
    """Arguments every multi-process command takes."""
    p.add_argument("--nproc", type=positive_int, default=2, help="workers to start (ignored under torchrun)")
    p.add_argument("--backend", choices=["gloo", "nccl"], default=None, help="default: NCCL if GPUs, else gloo")
    record_args(p)
    p.add_argument("--timeout", type=positive_float, default=600.0,
                   help="seconds for the run once every worker has started")


def check_record(parser: argparse.ArgumentParser, args) -> None:
    """Refuse, before any work, a --record name that exists without --overwrite (exit status 2)."""
    name = getattr(args, "record", None)
    if name and not getattr(args, "overwrite", False) and records.exists(name, records.RUNS_DIR):
        parser.error(f"--record {name}: data/runs/{name}.json exists; pass --overwrite to replace it, "
                     "or choose another name")


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


