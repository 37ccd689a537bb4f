"""The post's first lines, run without a launcher, to show their real errors.

Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

_WITHOUT_LAUNCHER = r"""
import json, os, torch, torch.distributed as dist, torch.nn as nn
os.environ.pop("LOCAL_RANK", None)
out = []
def main(local_rank):                 # the post's main(), its first lines as written
    if local_rank != -1:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        torch.distributed.init_process_group(backend="nccl")
    model = nn.Linear(4, 4)
    model = model.to(device)
def main_with_device(local_rank):     # ... with the answer's `else: device = ...`, sampler as posted
    device = torch.device("cpu")
    word_size = dist.get_world_size()
for fn in (main, main_with_device):
    try:
        fn(int(os.environ.get("LOCAL_RANK", -1)))
        out.append({"step": fn.__name__, "error": None, "message": ""})
    except Exception as exc:
        out.append({"step": fn.__name__, "error": type(exc).__name__, "message": str(exc)})
print(json.dumps(out))
"""


def run_without_launcher() -> list[dict]:
    """Run the post's first lines in a fresh `python` with LOCAL_RANK unset (no
    launcher); return each attempt's real exception type and message. Defined in notebook 01_case1_broken."""
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RANK", "RANK", "WORLD_SIZE")}
    proc = subprocess.run([sys.executable, "-c", _WITHOUT_LAUNCHER], capture_output=True,
                          text=True, env=env, timeout=120)
    if proc.returncode:
        raise RuntimeError(f"the no-launcher run failed unexpectedly:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
