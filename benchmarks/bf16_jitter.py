"""Why case 1's bf16 steps jitter on one H200 while its fp32 steps do not:
the fixed bf16 setup with fewer loader workers than the core budget gives it.

Hypothesis under test: in bf16 the step is short enough that the rank's own
thread (queueing kernels, pinning batches) is the bottleneck, and 15 loader
workers on 16 cores take that thread's core from it now and then. If so, the
spread within a run (IQR of the step times) falls with fewer workers while the
data wait stays near zero. Variants, interleaved over rounds (`spread.interleave`):
fixed fp32 and fixed bf16 with the core budget's workers ('cores'), and bf16
with 8, 4 and 2 workers.

From the repository root, on one GPU (about 3 minutes):
    PYTHONPATH=$PWD/src python3 benchmarks/bf16_jitter.py --out data/runs
Writes case1-h200-bf16-jitter.json (a run record, `ddp_lessons.tool.records`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path

from pairs_record import finish, pair_lines
from record_gpu_pairs import RULES, case1_worker

from ddp_lessons import launch
from ddp_lessons.tool import records, spread
from ddp_lessons.cases.case1 import Options as C1
from ddp_lessons.cases.case1 import make_vqa_dataset

PAIRS = [("fixed-bf16", "fixed-bf16-nw8", "bf16: the core budget's loader workers vs 8"),
         ("fixed-bf16", "fixed-bf16-nw4", "bf16: the core budget's loader workers vs 4"),
         ("fixed-bf16", "fixed-bf16-nw2", "bf16: the core budget's loader workers vs 2"),
         ("fixed", "fixed-bf16", "fp32 vs bf16 autocast (fixed)")]


def variants(args) -> dict:
    base = dict(model="m3ae", batch_size=args.batch, steps_limit=args.steps, evaluation="none")
    named = {"fixed": C1.fixed(**base), "fixed-bf16": C1.fixed(**base, amp=True)}
    for n in (8, 4, 2):
        named[f"fixed-bf16-nw{n}"] = C1.fixed(**base, amp=True, num_workers=n)
    return {k: dataclasses.asdict(v) for k, v in named.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("data/runs"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--skip", type=int, default=3)
    p.add_argument("--budget-s", type=float, default=300.0)
    p.add_argument("--data-root", type=Path, default=Path("/tmp/vqa_rad_224"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    data = make_vqa_dataset(args.data_root, image_size=224)
    v = variants(args)
    names = list(v)
    sink = {"kind": "case1-bf16-jitter", "path": str((args.out / "case1-h200-bf16-jitter.json").resolve()),
            "config": {"script": "benchmarks/bf16_jitter.py", "rounds": args.rounds, "skip": args.skip,
                       "rules": RULES, "world_size": 1, "pid": os.getpid(), "variants": v, "data": data,
                       "pairs": PAIRS},
            "order": spread.interleave(names, args.rounds), "pairs": PAIRS, "backend": "nccl",
            "log": None, "machine_extra": {"topology": records.gpu_topology()}}
    launch(case1_worker, (v, sink, str(args.data_root), args.skip, start + args.budget_s), world_size=1,
           backend="nccl", timeout=args.budget_s + 240, capture_output=False, progress=None)
    rows = records.load(sink["path"])["results"]["runs"]
    finish(sink, rows)
    for line in pair_lines(records.load(sink["path"])["results"]["pairs"]):
        print(line)
    print(f"done in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
