"""Overhead of StepTimer: the same DDP loop with the timer on, off, and in parts.

Runs `overhead.loop_seconds_per_step` in every mode (see ddp_lessons.course.timer_validation.overhead),
`--rounds` times in rotated order inside one launch, and compares the median time per step
with the uninstrumented loop ("off"). The issue's budget: 5% for the timer's default
("light" on GPUs, "full" on CPUs). benchmarks/timer_validation.py is the paired GPU check.

    python benchmarks/timing_overhead.py [--nproc 2] [--steps 60] [--width 1024] [--record NAME]
"""

import argparse
import statistics

from ddp_lessons.tool import records
from ddp_lessons import run
from ddp_lessons.course.timer_validation.overhead import MODES, all_modes


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--backend", default=None)
    p.add_argument("--record", metavar="NAME", help="save as data/runs/NAME.json")
    args = p.parse_args()
    out = run(all_modes, (args.steps, args.width, args.depth, args.batch, args.rounds),
                      world_size=args.nproc, backend=args.backend)
    # A step is as slow as its slowest rank.
    times = {m: [max(r[m][i] for r in out) for i in range(args.rounds)] for m in MODES}
    for i in range(args.rounds):
        print(f"round {i}: " + "  ".join(f"{m} {times[m][i] * 1e3:.3f}" for m in MODES) + " ms/step")
    med = {m: statistics.median(v) for m, v in times.items()}
    for m in MODES:
        print(f"{m:>8}: {med[m] * 1e3:8.3f} ms/step  {med[m] / med['off'] - 1:+7.2%}  "
              f"({(med[m] - med['off']) * 1e6:+.0f} us/step)")
    if args.record:
        rec = records.make_record("overhead", vars(args), {"per_round": times, "median": med,
                                  "overhead": med["full"] / med["off"] - 1,
                                  "overhead_light": med["light"] / med["off"] - 1}, backend=args.backend)
        print("saved", records.save(rec, args.record, runs_dir=records.RUNS_DIR, overwrite=True))


if __name__ == "__main__":
    main()
