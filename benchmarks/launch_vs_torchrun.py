"""Launch cost: `ddp_lessons.launch` against `torchrun --standalone` on the same worker.

Both start 2 gloo workers, rendezvous, run one all-reduce (toy.hello) and tear
down. `launch` is timed from a Python process that already imported torch
(a notebook kernel's situation); torchrun is timed as the whole command a
learner types. Prints each run and the median ratio launch / torchrun.

    python benchmarks/launch_vs_torchrun.py [--repeats 7] [--nproc 2] [--record NAME]
"""

import argparse
import statistics
import subprocess
import sys
import time

from ddp_lessons import launch
from ddp_lessons.tool import records
from ddp_lessons.cases.intro import workers as toy


def time_launch(n):
    t0 = time.perf_counter()
    out = launch(toy.hello, world_size=n)
    assert out[0]["sum"] == n * (n + 1) / 2
    return time.perf_counter() - t0


def time_torchrun(n):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
           "-m", "ddp_lessons", "hello"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--record", metavar="NAME", help="save as data/runs/NAME.json")
    args = p.parse_args()
    time_launch(args.nproc)  # warm the page cache for both
    rows = []
    for i in range(args.repeats):  # alternate, so drift hits both alike
        a, b = time_launch(args.nproc), time_torchrun(args.nproc)
        rows.append((a, b))
        print(f"run {i}: launch {a:.2f} s  torchrun {b:.2f} s  ratio {a / b:.2f}", flush=True)
    ratio = statistics.median(a / b for a, b in rows)
    print(f"median launch {statistics.median(a for a, _ in rows):.2f} s, "
          f"torchrun {statistics.median(b for _, b in rows):.2f} s, median ratio {ratio:.2f}")
    if args.record:
        rec = records.make_record("launch-vs-torchrun", vars(args), {"launch": [a for a, _ in rows],
                                  "torchrun": [b for _, b in rows], "median_ratio": ratio}, backend="gloo")
        print("saved", records.save(rec, args.record, runs_dir=records.RUNS_DIR, overwrite=True))


if __name__ == "__main__":
    main()
