"""What Lightning's `strategy='ddp'` launch costs apart from the fit, for the posted script's shape.

Runs `ddp_lessons/cases/case2/posted_script.py` as a command (a fresh Python, as the post's user ran
it) in each setup, in interleaved rounds (`spread.interleave`), and saves one run record with every
launch's stamps, the 1-minute load average before and after each launch, and rank 0's parts
(`case2.launch_cost.parts`). A setup is ACCELERATOR:DEVICES:STRATEGY.

    PYTHONPATH=$PWD/src python benchmarks/lightning_launch.py --record case2-launch-cpu2
    PYTHONPATH=$PWD/src python3 benchmarks/lightning_launch.py --setups gpu:1:auto,gpu:1:ddp,cpu:1:auto,cpu:3:ddp \\
        --record case2-launch-h200x1          # one GPU: a 1-rank ddp launch's CUDA and NCCL set-up
    PYTHONPATH=$PWD/src python3 benchmarks/lightning_launch.py --setups gpu:1:auto,gpu:3:ddp \\
        --nvml --record case2-launch-h200x3   # three GPUs: the post's own launch (not recorded yet)

Run it on a quiet machine: the record keeps the load so a reader can see how quiet it was.
"""

import argparse
import os
import statistics

from ddp_lessons.cases.case2 import launch_cost
from ddp_lessons.tool import records, spread


def _setup(text: str) -> tuple[str, int, str]:
    acc, devices, strategy = text.split(":")
    if acc not in ("cpu", "gpu"):
        raise argparse.ArgumentTypeError(f"{text!r}: the accelerator is cpu or gpu")
    return acc, int(devices), strategy


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setups", default="cpu:1:auto,cpu:3:ddp", help="comma list of ACCELERATOR:DEVICES:STRATEGY")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--nvml", action="store_true", help="the post's NVML block in every training_step (GPU)")
    p.add_argument("--record", metavar="NAME", help="save as data/runs/NAME.json")
    p.add_argument("--runs-dir", default=None, help="where to save (default: the course's data/runs)")
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args()
    setups = {launch_cost.setup_name(*_setup(s)): _setup(s) for s in args.setups.split(",")}
    launch_cost.run_script(1, epochs=1)  # warm the page cache: the first import of torch is not a launch's
    runs, order = [], spread.interleave(list(setups), args.rounds)
    for r, names in enumerate(order):
        for pos, name in enumerate(names):
            acc, devices, strategy = setups[name]
            load_before = os.getloadavg()[0]
            run = launch_cost.run_script(devices, strategy, acc, args.epochs, args.nvml)
            run.update(round=r, position=pos, load_before=load_before, load_after=os.getloadavg()[0],
                       parts=launch_cost.parts(run), launch=launch_cost.launch_s(run))
            runs.append(run)
            print(f"round {r} {name:12s} wall {run['wall']:6.2f} s, launch apart from the epochs "
                  f"{run['launch']:6.2f} s (load {load_before:.1f} -> {run['load_after']:.1f})", flush=True)
    for name in setups:
        xs = [x["launch"] for x in runs if x["setup"] == name]
        print(f"{name:12s} launch apart from the epochs: median {statistics.median(xs):.2f} s "
              f"({min(xs):.2f} .. {max(xs):.2f} over {len(xs)} rounds)")
    if args.record:
        config = {"script": "benchmarks/lightning_launch.py", "workload": "cases/case2/posted_script.py",
                  "setups": list(setups), "rounds": args.rounds, "epochs": args.epochs, "nvml": args.nvml,
                  "measured": "wall clock from the command's start to rank 0's exit; 'launch' = that wall less "
                              "rank 0's epochs (on_train_start to on_train_end)"}
        rec = records.make_record("case2-launch", config, {"runs": runs, "order": order},
                                  backend=None)
        path = records.save(rec, args.record, runs_dir=args.runs_dir or records.RUNS_DIR, overwrite=args.overwrite)
        print("saved", path)


if __name__ == "__main__":
    main()
