"""Does `diagnose` name causes planted in a run, through the public API only?

The workload of `benchlib.planted` (a tied-embedding language model, gradient accumulation
over 4 micro-steps without no_sync, rank 0 saving checkpoints, rank 1's sequences 1.5x longer) on 2
ranks, in --rounds interleaved rounds of every variant (each but "all" removes one cause). Per run:
the causes `diagnose` named, with their seconds and shares. Saves a record (kind "planted-causes").

    PYTHONPATH=$PWD/src python3 benchmarks/planted_causes.py --record planted-causes-cpu2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ddp_lessons import diagnose, launch
from ddp_lessons.tool import records, spread

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchlib, for this process and its workers
from benchlib.planted import VARIANTS, planted  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=6, help="optimizer steps per run (4 micro-steps each)")
    p.add_argument("--record", metavar="NAME", help="save as data/runs/NAME.json")
    a = p.parse_args()
    runs, t0 = [], time.time()
    for r, row in enumerate(spread.interleave(list(VARIANTS), a.rounds)):
        for v in row:
            out = launch(planted, (v, a.steps), world_size=2, threads=1, timeout=300, progress=None)
            d = diagnose(out)
            runs.append({"round": r, "variant": v, "removed": VARIANTS[v], "load": os.getloadavg()[0],
                         "findings": [{"cause": f.cause, "what": f.what, "seconds": f.seconds, "share": f.share,
                                       "status": f.status, "detail": f.detail} for f in d.findings],
                         "startup": d.startup.seconds if d.startup else None, "confirmations": d.confirmations,
                         "scores": d.scores, "notes": d.notes, "undecided": d.undecided,
                         "wall": [x["wall"] for x in d.ranks]})
            print(r, v, [(f.cause, round(f.seconds, 3), f"{f.share:.0%}") for f in d.findings], flush=True)
    named = {v: {c: sum(c in [f["cause"] for f in x["findings"]] for x in runs if x["variant"] == v)
                 for c in dict.fromkeys(f["cause"] for x in runs for f in x["findings"])} for v in VARIANTS}
    res = {"runs": runs, "named": named, "rounds": a.rounds, "elapsed_s": time.time() - t0}
    print("rounds in which each cause was named, per variant:", named)
    if a.record:
        rec = records.make_record("planted-causes", {"script": "benchmarks/planted_causes.py", **vars(a),
                                                     "variants": VARIANTS}, res, backend="gloo")
        print("saved", records.save(rec, a.record, runs_dir=records.RUNS_DIR, overwrite=True))


if __name__ == "__main__":
    main()
