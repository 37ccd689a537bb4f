"""`python -m ddp_lessons case1 ...`: one training run, printed and optionally
recorded (notebook 01 runs it under torchrun). The GPU comparisons of the
lessons are recorded as interleaved repeats by benchmarks/record_gpu_pairs.py.
Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import dataclasses

from ...tool import commands, runtime
from .options import Options
from .readout import per_rank
from .synthetic import tiny_dataset
from .train import train


def cli_command(p):
    """`python -m ddp_lessons case1`: one training run, printed and optionally recorded."""
    commands.common(p)
    p.add_argument("--preset", choices=list(Options.PRESETS), default="broken")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                   type=Options.override_arg,
                   help="override one Options field, typed and checked by the field, "
                        "e.g. find_unused_parameters=false")
    p.add_argument("--model", choices=Options.choices()["model"], default=None)
    p.add_argument("--batch-size", type=commands.positive_int, default=None)
    p.add_argument("--epochs", type=commands.positive_int, default=1)
    p.add_argument("--steps-limit", type=commands.positive_int, default=None)
    p.add_argument("--amp", action="store_true", help="bf16 autocast around the forward pass")
    p.add_argument("--data-root", default=None, help="default: the tiny dataset in data/vqa_tiny")

    def run(args):
        changes = dict(args.overrides)
        for key, val in (("model", args.model), ("batch_size", args.batch_size),
                         ("steps_limit", args.steps_limit)):
            if val is not None:
                changes[key] = val
        if args.amp:
            changes["amp"] = True
        o = Options.preset(args.preset, **changes)
        if args.data_root is None and not runtime.under_torchrun():
            tiny_dataset()  # once, before the workers start
        out = commands.run_workers(args, train, (dataclasses.asdict(o), args.data_root, args.epochs))
        if out is None:
            return
        for row in per_rank(out):
            print(f"rank {row['rank']}: {row['samples']} samples in {row['steps']} steps, "
                  f"step {row['step_time'] * 1e3:.1f} ms (data {row['data'] * 1e3:.1f}, "
                  f"exposed all-reduce {row['exposed'] * 1e3:.1f}), all-reduce "
                  f"{row['allreduce_calls']} calls / {row['allreduce_bytes']} B per step, "
                  f"epoch {', '.join(f'{t:.2f}' for t in row['epoch_synced'])} s")
        config = {"preset": args.preset, "options": dataclasses.asdict(o), "epochs": args.epochs,
                  "data_root": args.data_root, "world_size": len(out)}
        commands.save_record(args, "case1", config, {"ranks": out, "per_rank": per_rank(out)},
                        backend=out[0]["backend"])
    return run
