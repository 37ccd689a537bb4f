"""`python -m ddp_lessons case2 ...`: case 2's runs from a shell, for recording.

Modes: posted (the posted test on one device, or `--launch` for N workers),
fixed (the fixed test in Lightning and in plain PyTorch, matched), nvml (the
post's NVML block, per call), sweep (plain-loop compute per step over widths,
the break-even predictor's compute figures). benchmarks/record_case2_gpu.sh
records nvml and sweep on one GPU; the pairs (posted/fixed, Lightning/plain,
NVML on/off) are recorded as interleaved repeats by benchmarks/record_gpu_pairs.py.
A record's config holds what `train.results` needs to make the run again.
"""

from __future__ import annotations

import argparse
import dataclasses

from ...tool import commands
from ...tool.runs import Rank
from .lightning import fit_here
from .options import Options
from .train import fit_worker
from . import nvml, plain

MODES = ("posted", "fixed", "nvml", "sweep")


def _options(args) -> Options:
    kw = dict(epochs=args.epochs, batch_size=args.batch, size=args.size, width=args.width,
              depth=args.depth, train_batches=args.train_batches)
    kw.update(args.overrides)
    opts = Options.preset("posted" if args.mode == "posted" else "fixed", **kw)
    if args.mode == "posted" and nvml.error() is not None:
        opts = opts.replace(nvml="off")  # NVML missing here: the block would raise (see nvml mode)
    return opts


def _run_mode(args, opts):
    acc = args.accelerator  # None: workers follow their process group; one process runs on the CPU
    if args.mode == "nvml":
        return nvml.costs(args.repeats)
    if args.mode == "sweep":
        return {"rows": plain.compute_sweep(opts, args.widths, acc, args.steps)}
    if args.launch:  # the launcher (or torchrun) starts the processes; Lightning reuses them
        out = {"lightning": commands.run_workers(args, fit_worker, (opts, acc))}
        if out["lightning"] is not None and args.mode == "fixed":
            out["plain"] = commands.run_workers(args, plain.fit, (opts, acc))
        return None if out["lightning"] is None else out
    out = {"lightning": [fit_here(opts, 1, accelerator=acc or "cpu")]}
    if args.mode == "fixed":
        out["plain"] = [plain.fit(opts, acc)]
    return out


def _print(args, res):
    if args.mode == "nvml":
        cost = res["error"] or (f"{res['per_call'] * 1e3:.3f} ms per call where nothing holds NVML open, "
                                f"{res['held']['per_call'] * 1e3:.3f} ms where it is held")
        print(f"NVML init+query+shutdown: {cost}")
        return
    if args.mode == "sweep":
        for r in res["rows"]:
            print(f"width {r['width']:>6d}: {r['params']:>10d} params, compute {r['compute'] * 1e3:.3f} ms/step")
        return
    for name, ranks in res.items():
        for r in ranks:
            step = Rank(r).median("step_time", 3)
            print(f"{name} rank {r['rank']}/{r['world_size']}: wall {r['wall']:.2f} s, "
                  f"step {step * 1e3:.3f} ms (median), {r['optimizer_steps']} optimizer steps")


def _widths(text: str) -> list[int]:
    try:
        widths = [int(x) for x in text.split(",")]
    except ValueError:
        widths = []
    if not widths or min(widths) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: use widths >= 1 separated by commas, e.g. 64,256,1024")
    return widths


def cli_command(p):
    """`python -m ddp_lessons case2 --mode {posted,fixed,nvml,sweep} ...`; returns the runner.

    posted: the posted test on one device (or `--launch` for N workers);
    fixed: the fixed test in Lightning and in plain PyTorch, matched;
    nvml: the cost of the post's NVML block per call; sweep: plain-loop
    compute per step over `--widths` (the predictor's compute figures).
    """
    commands.common(p)
    p.add_argument("--mode", choices=MODES, default="posted")
    p.add_argument("--accelerator", choices=["cpu", "gpu"], default=None,
                   help="default: with --launch, the workers' process group decides (gpu under NCCL); "
                        "in one process, cpu")
    p.add_argument("--launch", action="store_true", help="run on --nproc workers (default: one process)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                   type=Options.override_arg,
                   help="override one Options field, typed and checked by the field, e.g. nvml=off")
    p.add_argument("--epochs", type=commands.positive_int, default=3)
    p.add_argument("--batch", type=commands.positive_int, default=256)
    p.add_argument("--size", type=commands.positive_int, default=5000)
    p.add_argument("--width", type=commands.positive_int, default=256)
    p.add_argument("--depth", type=commands.positive_int, default=3)
    p.add_argument("--train-batches", type=commands.positive_float, default=1.0, help="limit_train_batches")
    p.add_argument("--repeats", type=commands.positive_int, default=50, help="nvml mode: calls to time")
    p.add_argument("--steps", type=commands.positive_int, default=30, help="sweep mode: steps per width")
    p.add_argument("--widths", type=_widths, default=[64, 256, 1024, 4096])

    def run(args):
        if args.train_batches >= 1:
            args.train_batches = int(args.train_batches) if args.train_batches > 1 else 1.0
        opts = _options(args)
        res = _run_mode(args, opts)
        if res is None:
            return  # a torchrun rank other than 0
        _print(args, res)
        ran = res.get("lightning", [{}])[0].get("accelerator") if args.launch else None
        # The accelerator that ran, not only the one asked for: one process runs on the CPU
        # when none is named, so a record of it says "cpu".
        used = args.accelerator or (ran if args.launch else "cpu")
        config = {"mode": args.mode, "accelerator": used, "launch": args.launch,
                  "options": dataclasses.asdict(opts), "steps": args.steps, "widths": args.widths,
                  "repeats": args.repeats}  # what train.results needs to make the run again
        commands.save_record(args, "case2", config, res, backend=args.backend or ("nccl" if ran == "gpu" else None))
    return run
