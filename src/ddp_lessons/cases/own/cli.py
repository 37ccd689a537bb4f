"""`python -m ddp_lessons own --preset broken --nproc 2`: notebook 07's workload run once on every rank,
and its diagnosis printed; `--trace DIR` first profiles a few steps into DIR (the layout Holistic Trace
Analysis reads, and `diagnose` reads for host-bound GPU steps); `--record NAME` saves the run.
Under torchrun: `torchrun --standalone --nproc_per_node 2 -m ddp_lessons own --preset fixed`.
Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

import dataclasses

from ...tool import commands
from ...tool.diagnosis import diagnose
from ...tool.runs import Run
from .options import Options
from .trace import profile_steps
from .train import train


def options_from(args) -> Options:
    """The Options the command's arguments ask for: the preset, then each --set and the sizes given."""
    changes = dict(args.overrides)
    for key in ("epochs", "width", "train_size", "test_size"):
        if getattr(args, key) is not None:
            changes[key] = getattr(args, key)
    return Options.preset(args.preset, **changes)


def cli_command(p):
    """`python -m ddp_lessons own`: the workload on every rank, diagnosed, optionally traced and recorded."""
    commands.common(p)
    p.add_argument("--preset", choices=list(Options.PRESETS), default="broken")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                   type=Options.override_arg, help="override one Options field, e.g. evaluation=distributed")
    p.add_argument("--epochs", type=commands.positive_int, default=None)
    p.add_argument("--width", type=commands.positive_int, default=None, help="32: half of ResNet-18's width")
    p.add_argument("--train-size", type=commands.positive_int, default=None)
    p.add_argument("--test-size", type=commands.positive_int, default=None)
    p.add_argument("--trace", metavar="DIR", default=None,
                   help="first profile 5 steps per rank into DIR (rank-N.json.gz, for Perfetto and HTA)")

    def run(args):
        o = options_from(args)
        if args.trace:
            commands.run_workers(args, profile_steps, (o, args.trace))
        out = commands.run_workers(args, train, (o,))
        if out is None:   # a rank other than 0 under torchrun
            return
        on_gpu = str(out[0]["device"]).startswith("cuda")   # a CPU trace has no GPU work to read
        print(diagnose(Run(list(out), name=f"own {args.preset}", trace=args.trace if on_gpu else None)))
        config = {"preset": args.preset, "options": dataclasses.asdict(o), "world_size": len(out),
                  "trace": args.trace}
        commands.save_record(args, "own-run", config, {"ranks": list(out)}, backend=out[0]["backend"])
    return run
