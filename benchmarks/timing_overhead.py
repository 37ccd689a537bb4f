"""Overhead of StepTimer: the same DDP loop with the timer on and off.

Runs `toy.train_mlp` alternately instrumented and not, `--pairs` times, and
compares the median wall time per step (host clock around the whole loop,
synchronised once at the end on GPUs). The instrumented step should be within
3% of the uninstrumented one.

    python benchmarks/timing_overhead.py [--nproc 2] [--steps 60] [--width 1024] [--record NAME]
"""

import argparse
import statistics

from ddp_lessons import records, runtime
from ddp_lessons.overhead import loop_seconds_per_step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--backend", default=None)
    p.add_argument("--record", metavar="NAME", help="save as data/runs/NAME.json")
    args = p.parse_args()
    rows = []
    for i in range(args.pairs):
        pair = {}
        for timed in (False, True) if i % 2 == 0 else (True, False):
            out = runtime.run(loop_seconds_per_step, (args.steps, args.width, args.depth, args.batch, timed),
                              world_size=args.nproc, backend=args.backend)
            pair[timed] = max(out)  # a step is as slow as its slowest rank
        rows.append(pair)
        print(f"pair {i}: off {pair[False] * 1e3:.3f} ms/step  on {pair[True] * 1e3:.3f} ms/step  "
              f"overhead {pair[True] / pair[False] - 1:+.2%}", flush=True)
    off = statistics.median(r[False] for r in rows)
    on = statistics.median(r[True] for r in rows)
    print(f"median: off {off * 1e3:.3f} ms/step, on {on * 1e3:.3f} ms/step, overhead {on / off - 1:+.2%}")
    if args.record:
        rec = records.make_record("overhead", vars(args), {"off": [r[False] for r in rows], "on": [r[True] for r in rows],
                                                           "overhead": on / off - 1}, backend=args.backend)
        print("saved", records.save(rec, args.record, overwrite=True))


if __name__ == "__main__":
    main()
