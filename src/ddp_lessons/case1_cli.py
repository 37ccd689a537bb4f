"""`python -m ddp_lessons case1 ...` (one training run, printed and optionally
recorded; benchmarks/record_case1_gpu.sh runs it on one GPU), and the post's
first lines run without a launcher, to show their real errors.
Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

from . import runtime
from .case1 import Case1Options, parse_override, tiny_dataset, train_case1
from .case1_results import per_rank


# -- the post run without a launcher -------------------------------------------
_WITHOUT_LAUNCHER = r"""
import json, os, torch, torch.distributed as dist, torch.nn as nn
os.environ.pop("LOCAL_RANK", None)
out = []
def main(local_rank):                 # the post's main(), its first lines as written
    if local_rank != -1:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        torch.distributed.init_process_group(backend="nccl")
    model = nn.Linear(4, 4)
    model = model.to(device)
def main_with_device(local_rank):     # ... with the answer's `else: device = ...`, sampler as posted
    device = torch.device("cpu")
    word_size = dist.get_world_size()
for fn in (main, main_with_device):
    try:
        fn(int(os.environ.get("LOCAL_RANK", -1)))
        out.append({"step": fn.__name__, "error": None, "message": ""})
    except Exception as exc:
        out.append({"step": fn.__name__, "error": type(exc).__name__, "message": str(exc)})
print(json.dumps(out))
"""


def run_without_launcher() -> list[dict]:
    """Run the post's first lines in a fresh `python` with LOCAL_RANK unset (no
    launcher); return each attempt's real exception type and message."""
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RANK", "RANK", "WORLD_SIZE")}
    proc = subprocess.run([sys.executable, "-c", _WITHOUT_LAUNCHER], capture_output=True,
                          text=True, env=env, timeout=120)
    if proc.returncode:
        raise RuntimeError(f"the no-launcher run failed unexpectedly:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cli_command(p):
    """`python -m ddp_lessons case1`: one training run, printed and optionally recorded."""
    from . import cli
    cli.common(p)
    p.add_argument("--preset", choices=["broken", "answer", "fixed"], default="broken")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                   help="override one Case1Options field, e.g. find_unused_parameters=false")
    p.add_argument("--model", choices=["tiny", "m3ae"], default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps-limit", type=int, default=None)
    p.add_argument("--amp", action="store_true", help="bf16 autocast around the forward pass")
    p.add_argument("--data-root", default=None, help="default: the tiny dataset in data/vqa_tiny")

    def run(args):
        changes = dict(parse_override(s) for s in args.overrides)
        for key, val in (("model", args.model), ("batch_size", args.batch_size),
                         ("steps_limit", args.steps_limit)):
            if val is not None:
                changes[key] = val
        if args.amp:
            changes["amp"] = True
        o = Case1Options.preset(args.preset, **changes)
        if args.data_root is None and not runtime.under_torchrun():
            tiny_dataset()  # once, before the workers start
        out = cli.run_workers(args, train_case1, (dataclasses.asdict(o), args.data_root, args.epochs))
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
        cli.save_record(args, "case1", config, {"ranks": out, "per_rank": per_rank(out)},
                        backend=out[0]["backend"])
    return run
