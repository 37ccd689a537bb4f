"""Which sockets a one-machine NCCL launch listens on: with the launcher's
default (NCCL_SOCKET_IFNAME=lo) and with NCCL left to pick an interface.

    python benchmarks/nccl_loopback.py --record nccl-loopback-h200x1

Each variant runs in a fresh interpreter (NCCL reads the variable once per
process). The record holds every rank's listening TCP and bound UDP
sockets and those beyond loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

VARIANTS = {
    "launcher default (NCCL_SOCKET_IFNAME=lo)": {},
    # NCCL treats an empty value as unset; the launcher's setdefault keeps it empty.
    "NCCL picks the interface": {"NCCL_SOCKET_IFNAME": ""},
}


def child() -> None:
    from ddp_lessons import launch
    from ddp_lessons.tool.launcher import visible_gpus
    from ddp_lessons.cases.intro.sockets import listening_sockets
    out = launch(listening_sockets, world_size=max(1, visible_gpus()), backend="nccl", timeout=120)
    print(json.dumps(out))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--record", metavar="NAME")
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args()
    if args.child:
        return child()
    from ddp_lessons.tool import records
    from ddp_lessons.cases.intro.sockets import beyond_loopback
    results = {}
    for name, env in VARIANTS.items():
        proc = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True,
                              env={**os.environ, **env}, timeout=300)
        if proc.returncode:
            results[name] = {"error": proc.stderr[-3000:]}
            print(f"{name}: failed\n{proc.stderr[-3000:]}")
            continue
        ranks = json.loads(proc.stdout.strip().splitlines()[-1])
        outside = sorted({a for r in ranks for a in beyond_loopback(map(tuple, r["listen_tcp"] + r["udp"]))})
        results[name] = {"ranks": ranks, "beyond_loopback": outside}
        print(f"{name}: {len(ranks)} rank(s), listening beyond loopback: {outside or 'nothing'}")
    if args.record:
        rec = records.make_record("nccl-loopback", {"variants": VARIANTS}, results, backend="nccl")
        rec["machine"]["topology"] = records.gpu_topology()
        print("saved", records.save(rec, args.record, runs_dir=records.RUNS_DIR, overwrite=args.overwrite))


if __name__ == "__main__":
    main()
