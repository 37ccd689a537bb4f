"""Case 2's real levers on one GPU: the posted step, the fixed step, fused Adam,
torch.compile(mode="reduce-overhead"), the whole step in one CUDA graph, and DDP
at world size 1, timed in interleaved rounds (`ddp_lessons.cases.case2.levers`: `catalog`, `rounds`).

From the repository root, on one H200 (a few minutes; no round starts that
would end past --budget-s):
    PYTHONPATH=$PWD/src python3 benchmarks/case2_levers.py --out $OUT
Writes case2-h200-levers.json in --out (a folder, or a .json path), rewritten
after every round, so a timeout leaves the rounds done.
CPU dry run (seconds; compile and the CUDA graph are skipped, with the reason):
    PYTHONPATH=$PWD/src python3 benchmarks/case2_levers.py --device cpu --width 64 \\
        --batch 32 --rounds 3 --steps 20 --warmup 3 --out /tmp/levers
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ddp_lessons.cases.case2 import levers
from ddp_lessons.cases.case2.levers import rounds


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("data/runs"), help="a folder, or the record's .json path")
    p.add_argument("--tag", default=None, help="name: case2-TAG-levers.json (default: the GPU's model, e.g. h200; cpu)")
    p.add_argument("--device", default=None, help="cuda, cuda:1 or cpu (default: cuda where there is one)")
    p.add_argument("--levers", default=",".join(levers.LEVERS), help=f"comma list of {', '.join(levers.LEVERS)}")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=300, help="timed steps per lever per round")
    p.add_argument("--warmup", type=int, default=50, help="untimed steps before each lever's timed steps")
    p.add_argument("--budget-s", type=float, default=240.0, help="no round starts that would end past this")
    for name in ("width", "depth", "batch"):
        p.add_argument(f"--{name}", type=int, default=None, help="default: the post's")
    p.add_argument("--overwrite", action="store_true", help="replace a record of the same name")
    return p.parse_args(argv)


def main(argv=None) -> Path:
    args = parse(argv)
    cfg = {k: getattr(args, k) for k in ("width", "depth", "batch") if getattr(args, k) is not None}
    path = rounds.record(args.out, args.levers.split(","), cfg, tag=args.tag, device=args.device,
                  rounds=args.rounds, steps=args.steps, warmup=args.warmup, budget_s=args.budget_s,
                  overwrite=args.overwrite, argv=vars(args))
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()
