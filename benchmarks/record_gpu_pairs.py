"""Record every pair of setups the lessons compare, on ONE GPU, as interleaved
repeats: each variant runs once per round, the rounds' order rotated and
alternately reversed (`spread.interleave`), and every pair is judged from its
per-round ratios B/A (`spread.compare_rounds`: "B faster" only when every round agrees).

Case 1 (one launch, world size 1, NCCL; model m3ae at 224 px, batch 32):
  broken vs fixed (fp32), fixed vs fixed-bf16 (autocast), fixed-bf16-item
  (loss.item() every step) vs fixed-bf16, fixed-bf16-comm16 (bf16 all-reduce)
  vs fixed-bf16.
Case 2 (in this process, Lightning's single-device fit and the plain loop):
  posted vs fixed, fixed (Lightning) vs fixed-plain, fixed-nvml (NVML block
  every step) vs fixed.

From the repository root, on one H200 (about 5 to 6 minutes; no round starts
that would end past --budget-s, default 420 s):
    PYTHONPATH=$PWD/src python3 benchmarks/record_gpu_pairs.py --out $OUT
Writes case1-h200-pairs.json, case2-h200-pairs.json (run records, `ddp_lessons.tool.records`;
rewritten after every run, so a timeout leaves what was done) and record-gpu-pairs-h200.log.
CPU dry run (a minute or two on two cores; never under the h200 names):
    PYTHONPATH=$PWD/src python3 benchmarks/record_gpu_pairs.py --backend gloo --model tiny \\
        --image-size 64 --steps 4 --rounds 2 --case2-epochs 1 --out /tmp/pairs
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import statistics
import time
from pathlib import Path

from pairs_record import error_row, finish, pair_lines, run_rounds, save, say, step_row

from ddp_lessons.tool import records, spread
from ddp_lessons.cases.case1 import Options as C1

CASE1_PAIRS = [("broken", "fixed", "the posted script vs every fix (fp32)"),
               ("fixed", "fixed-bf16", "fp32 vs bf16 autocast (fixed)"),
               ("fixed-bf16-item", "fixed-bf16", "loss.item() every step vs loss.detach() (fixed, bf16)"),
               ("fixed-bf16-comm16", "fixed-bf16", "bf16 all-reduce vs fp32 all-reduce (fixed, bf16)")]
# Not a lesson's pair by default (notebook 01 shows the posted script in bf16): --case1-extra broken-bf16
CASE1_EXTRA = {"broken-bf16": ("broken", "broken-bf16", "fp32 vs bf16 autocast (the posted script)")}
CASE2_PAIRS = [("posted", "fixed", "the posted Lightning test vs the fixed one"),
               ("fixed", "fixed-plain", "Lightning vs a plain PyTorch loop (fixed test)"),
               ("fixed-nvml", "fixed", "NVML block every step vs none (fixed test, Lightning)")]
PART_KEYS = ("data", "forward", "backward", "optimizer", "allreduce", "exposed")


# -- case 1: one launched rank runs every round ---------------------------------
def case1_variants(args) -> dict:
    base = dict(model=args.model, batch_size=args.batch, steps_limit=args.steps, evaluation="none")
    base.update(args.case1_set)
    named = {"broken": C1.broken(**base), "broken-bf16": C1.broken(**base, amp=True),
             "fixed": C1.fixed(**base), "fixed-bf16": C1.fixed(**base, amp=True),
             "fixed-bf16-item": C1.fixed(**base, amp=True, loss_accum="item"),
             "fixed-bf16-comm16": C1.fixed(**base, amp=True, comm_dtype="bf16")}
    return {k: dataclasses.asdict(v) for k, v in named.items()}


def case1_run(o: dict, data_root: str, skip: int) -> dict:
    from ddp_lessons.cases.case1 import train
    t0 = time.perf_counter()
    try:
        r = train(o, data_root, 1, keep_qids=False)
        wall = time.perf_counter() - t0
    finally:
        _free()
    steps = r["timer"]["steps"]
    later = steps[skip:] or steps
    return step_row([s["step_time"] for s in steps], skip, wall=wall,
                    epoch_synced=r["epochs"][0]["time_synced"], data_waits=[s["data"] for s in steps],
                    parts={k: statistics.median(s.get(k, 0.0) for s in later) for k in PART_KEYS},
                    threads=r["threads"], num_workers=r["num_workers"], children_left=_children(),
                    allreduce_bytes=later[-1]["allreduce_bytes"], max_memory_bytes=r.get("max_memory_bytes"))


def _free() -> None:
    """The plan (model, optimizer, loader with persistent workers) sits in
    reference cycles: free it, and its loader processes, before the next variant."""
    import torch
    import torch.distributed as dist
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    dist.barrier()


def _children():
    """Processes this rank still has (loader workers a run left behind would show here)."""
    try:
        import psutil
    except ImportError:
        return None
    return len(psutil.Process().children(recursive=True))


def case1_worker(variants: dict, sink: dict, data_root: str, skip: int, deadline: float) -> list[dict]:
    """Worker (one rank per GPU): every round of case 1 in this process."""
    import torch.distributed as dist
    rank0 = dist.get_rank() == 0
    return run_rounds(variants, sink, lambda name, o: case1_run(o, data_root, skip), deadline, rank0)


def record_case1(args, sink: dict, deadline: float) -> None:
    from ddp_lessons import launch
    from ddp_lessons.cases.case1 import make_vqa_dataset
    t0 = time.time()
    s = make_vqa_dataset(args.data_root, image_size=args.image_size)
    say(f"case1: dataset {s['root']} ({'written' if s['created'] else 'found'}, {time.time() - t0:.1f} s)", sink["log"])
    variants = case1_variants(args)
    sink["config"].update(variants=variants, data=s)
    try:
        launch(case1_worker, (variants, sink, str(args.data_root), args.skip, deadline), world_size=1,
               backend=args.backend, timeout=max(120.0, deadline - time.time() + 180.0),
               capture_output=False, progress=None)
        status = "complete"
    except Exception as exc:  # noqa: BLE001 - keep what the worker saved
        status = f"launch failed: {type(exc).__name__}: {str(exc)[:2000]}"
        say(f"case1: {status}", sink["log"])
    rows = records.load(sink["path"])["results"]["runs"] if Path(sink["path"]).exists() else []
    finish(sink, rows, status)


# -- case 2: in this process (Lightning's single-device fit, the plain loop) ----
def case2_variants(args) -> dict:
    from ddp_lessons.cases.case2.nvml import error
    from ddp_lessons.cases.case2.options import Options as C2
    base = dict(epochs=args.case2_epochs)
    posted = C2.posted(**base)
    if error() is not None:
        posted = posted.replace(nvml="off")  # no NVML here: the block would raise (fixed-nvml records why)
    return {"posted": ("lightning", posted), "fixed": ("lightning", C2.fixed(**base)),
            "fixed-plain": ("plain", C2.fixed(**base)), "fixed-nvml": ("lightning", C2.fixed(**base, nvml="step"))}


def case2_run(runner: str, opts, accelerator: str, skip: int) -> dict:
    import torch

    from ddp_lessons.cases.case2.lightning import fit_here
    from ddp_lessons.cases.case2.nvml import error
    from ddp_lessons.cases.case2.plain import fit
    if opts.nvml == "step" and (err := error()) is not None:
        raise RuntimeError(f"NVML unavailable on this machine: {err}")
    r = fit(opts, accelerator) if runner == "plain" else fit_here(opts, 1, accelerator=accelerator)
    steps = r["timer"]["steps"]
    later = steps[skip:] or steps
    return step_row([s["step_time"] for s in steps], skip, wall=r["wall"], optimizer_steps=r["optimizer_steps"],
                    nvml_calls=r.get("nvml_calls"), threads=torch.get_num_threads(),
                    data_waits=[s["data"] for s in steps],
                    parts={k: statistics.median(s.get(k, 0.0) for s in later) for k in PART_KEYS})


def record_case2(args, sink: dict, deadline: float) -> None:
    variants = case2_variants(args)
    sink["config"].update(variants={k: {"runner": r, "options": dataclasses.asdict(o)}
                                    for k, (r, o) in variants.items()})
    acc = "gpu" if args.backend == "nccl" else "cpu"
    t0 = time.time()
    import pytorch_lightning  # noqa: F401 - its import takes seconds: before any fit is timed
    say(f"case2: Lightning imported ({time.time() - t0:.1f} s)", sink["log"])
    finish(sink, run_rounds(variants, sink, lambda name, v: case2_run(v[0], v[1], acc, args.skip), deadline))


# -- the command -----------------------------------------------------------------
RULES = {"verdict": spread.VERDICT_RULE, "steady": spread.STEADY_RULE}


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("data/runs"), help="folder for the records and the log")
    p.add_argument("--tag", default=None, help="names: case1-TAG-pairs.json (default: h200 on NCCL, cpu-dry on gloo)")
    p.add_argument("--cases", default="case2,case1", help="which cases, in this order")
    p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--skip", type=int, default=3, help="warm-up steps left out of each run's statistics")
    p.add_argument("--overwrite", action="store_true", help="replace records of the same names")
    p.add_argument("--budget-s", type=float, default=420.0,
                   help="no round starts that the longest round so far would take past this many seconds")
    p.add_argument("--model", choices=["m3ae", "tiny"], default="m3ae")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--data-root", type=Path, default=None, help="default: /tmp/vqa_rad_SIZE (written if missing)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=30, help="case 1: steps per run")
    p.add_argument("--case1-set", action="append", default=[], type=C1.override_arg, metavar="NAME=VALUE",
                   help="case 1: override an option in every variant, e.g. num_workers=8")
    p.add_argument("--case1-extra", action="append", default=[], choices=list(CASE1_EXTRA),
                   help="case 1: an extra pair (5 more runs)")
    p.add_argument("--case2-epochs", type=int, default=5, help="case 2: epochs per fit (20 steps each)")
    p.add_argument("--case2-budget-s", type=float, default=90.0, help="case 2's share of --budget-s")
    args = p.parse_args(argv)
    args.tag = args.tag or ("h200" if args.backend == "nccl" else "cpu-dry")
    args.data_root = args.data_root or Path(f"/tmp/vqa_rad_{args.image_size}")
    return args


def main(argv=None):
    args = parse(argv)
    start = time.time()
    deadline = start + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    log = str(args.out / f"record-gpu-pairs-{args.tag}.log")
    extra = {"topology": records.gpu_topology()} if args.backend == "nccl" else {}
    config = {"script": "benchmarks/record_gpu_pairs.py", "args": {k: str(v) if isinstance(v, Path) else v
              for k, v in vars(args).items()}, "rounds": args.rounds, "skip": args.skip, "rules": RULES,
              "world_size": 1, "pid": os.getpid()}
    cases = args.cases.split(",")
    paths = [args.out / f"{c}-{args.tag}-pairs.json" for c in cases]
    taken = [p for p in paths if p.exists()]
    if taken and not args.overwrite:
        raise SystemExit(f"{', '.join(map(str, taken))} exist: pass --overwrite to replace them, "
                         "or another --tag/--out")
    for case in cases:
        pairs = {"case1": CASE1_PAIRS + [CASE1_EXTRA[k] for k in args.case1_extra], "case2": CASE2_PAIRS}[case]
        names = list(dict.fromkeys(n for a, b, _ in pairs for n in (a, b)))
        sink = {"kind": f"{case}-pairs", "path": str((args.out / f"{case}-{args.tag}-pairs.json").resolve()),
                "config": dict(config, pairs=pairs), "order": spread.interleave(names, args.rounds),
                "pairs": pairs, "backend": args.backend, "log": log, "machine_extra": extra}
        say(f"== {case}: {len(names)} variants x {args.rounds} rounds -> {sink['path']} "
            f"({time.time() - start:.0f} s in, budget {args.budget_s:.0f} s)", log)
        try:
            if case == "case2":
                record_case2(args, sink, min(deadline, time.time() + args.case2_budget_s))
            else:
                record_case1(args, sink, deadline)
        except Exception as exc:  # noqa: BLE001 - the other case still runs
            say(f"{case} failed: {error_row(exc)['traceback']}", log)
            save(sink, [], f"failed: {type(exc).__name__}: {exc}")
        res = records.load(sink["path"])["results"]
        say(f"{case}: {res['status']}; steady runs {res['steady']['within']}/{res['steady']['runs']} "
            f"(IQR <= {spread.STEADY_IQR:.0%} of the median)", log)
        for line in pair_lines(res["pairs"]):
            say(line, log)
    say(f"done in {time.time() - start:.0f} s", log)


if __name__ == "__main__":
    main()
