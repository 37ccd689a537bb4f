"""Case 1's posted step at small per-rank batches on ONE GPU: the floor under notebook 03's model.

Notebook 03 models the post's two-GPU epoch at per-rank batches the post does not give. A step's
backward does not shrink in proportion to a small batch (the weights are read whatever the batch,
and the host launches the same kernels), so the model reads each batch's own recorded step here
instead of scaling one batch's. The posted setup (heads kept, find_unused_parameters=True, fp32,
4 loader workers, no evaluation) of the M3AE-size stand-in at 224 px, at per-rank batch 2 to 64,
in interleaved rounds (`spread.interleave`), in one launched process (world size 1, NCCL); the
timer in mode "full", so every bucket's ready time is kept for `whatif` (round 0 keeps them).
Also kept: the negotiated PCIe link (`nvidia-smi --query-gpu=...`), the check notebook 03 shows.

From the repository root, on one H200 (about 4 minutes):
    PYTHONPATH=$PWD/src python3 benchmarks/case1_batch_floor.py --out $OUT
Writes case1-h200-batches.json (a run record, `ddp_lessons.tool.records`).
CPU dry run (a minute on two cores; never under the h200 name):
    PYTHONPATH=$PWD/src python3 benchmarks/case1_batch_floor.py --backend gloo --model tiny \\
        --image-size 64 --batches 2 4 --rounds 1 --steps 6 --tag cpu-dry --out /tmp/floor
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import time
from pathlib import Path

from ddp_lessons import launch
from ddp_lessons.tool import records, spread
from ddp_lessons.cases.case1 import Options, make_vqa_dataset, train

PCIE_QUERY = ["nvidia-smi", "--query-gpu=name,pcie.link.gen.current,pcie.link.gen.max,"
              "pcie.link.width.current,pcie.link.width.max", "--format=csv"]
KEEP = ("rank", "world_size", "backend", "device", "batch_size", "steps_per_epoch", "grad_bytes", "params",
        "max_memory_bytes", "threads", "num_workers", "epochs", "options", "wrapped")
PARTS = ("step_time", "forward", "backward", "optimizer", "data", "exposed")


def slim(r: dict, keep_buckets: bool) -> dict:
    """A rank's result without what the model does not read (LR and loss traces, the log); the
    buckets' ready times only where `keep_buckets`."""
    out = {k: r[k] for k in KEEP if k in r}
    timer = dict(r["timer"])
    if not keep_buckets:
        timer["steps"] = [{k: v for k, v in s.items() if k != "buckets"} for s in timer["steps"]]
    out["timer"] = timer
    return out


def worker(order: list, model: str, data_root: str, steps: int, skip: int) -> list[dict]:
    """Worker (one rank): every (round, batch) of `order` in turn, in this process."""
    import torch
    import torch.distributed as dist
    out = []
    for rnd, batch in order:
        o = Options.broken(model=model, batch_size=batch, steps_limit=steps, evaluation="none")
        t0 = time.perf_counter()
        r = train(o, data_root, 1, keep_qids=False, timer_mode="full")
        wall = time.perf_counter() - t0
        later = r["timer"]["steps"][skip:]
        row = {"batch": batch, "round": rnd, "wall": wall, "skip": skip,
               "median": {k: statistics.median(s.get(k, 0.0) or 0.0 for s in later) for k in PARTS},
               "iqr_rel": spread.summary([s["step_time"] for s in later])["iqr_rel"],
               "rank": slim(r, keep_buckets=rnd == 0)}
        if torch.cuda.is_available():
            row["alloc_retries"] = torch.cuda.memory_stats().get("num_alloc_retries", 0)
        out.append(row)
        del r
        gc.collect()  # the plan sits in reference cycles: free it (and its GPU memory) before the next
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        dist.barrier()
    return out


def pcie() -> str | None:
    try:
        return subprocess.run(PCIE_QUERY, capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    p.add_argument("--model", choices=["m3ae", "tiny"], default="m3ae")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batches", type=int, nargs="+", default=[2, 4, 8, 16, 32, 64])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--skip", type=int, default=3)
    p.add_argument("--data-root", type=Path, default=Path("/tmp/vqa_rad_224"))
    p.add_argument("--tag", default="h200")
    args = p.parse_args(argv)
    data = make_vqa_dataset(args.data_root, image_size=args.image_size)
    order = [(r, b) for r, names in enumerate(spread.interleave([str(b) for b in args.batches], args.rounds))
             for b in map(int, names)]
    rows = launch(worker, (order, args.model, str(args.data_root), args.steps, args.skip), world_size=1,
                  backend=args.backend, timeout=1500, capture_output=False, progress=None)[0]
    per_batch = {str(b): [r["rank"] for r in sorted(rows, key=lambda r: r["round"]) if r["batch"] == b]
                 for b in args.batches}
    config = {"script": "benchmarks/case1_batch_floor.py", "args": {k: str(v) for k, v in vars(args).items()},
              "order": order, "data": data, "setup": "posted (Options.broken), evaluation none, timer mode full",
              "world_size": 1, "checks": {"command": " ".join(PCIE_QUERY), "output": pcie()}}
    rec = records.make_record("case1-batches", config,
                              {"runs": [{k: v for k, v in r.items() if k != "rank"} for r in rows],
                               "batch": per_batch}, backend=args.backend)
    args.out.mkdir(parents=True, exist_ok=True)
    path = records.save(rec, f"case1-{args.tag}-batches", runs_dir=args.out, overwrite=True)
    for r in rows:
        m = r["median"]
        print(f"round {r['round']} batch {r['batch']:3d}: step {m['step_time'] * 1e3:7.1f} ms (forward "
              f"{m['forward'] * 1e3:6.1f}, backward {m['backward'] * 1e3:6.1f}, optimizer {m['optimizer'] * 1e3:5.1f}, "
              f"data {m['data'] * 1e3:5.1f}), IQR {r['iqr_rel']:.1%}, run {r['wall']:.1f} s", flush=True)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
