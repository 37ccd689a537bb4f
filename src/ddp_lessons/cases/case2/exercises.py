"""Exercise checks of notebooks 04 to 06 (case 2); the answers are computed here."""

from __future__ import annotations

import math

from ...course.exercises import check, compare_number, exercise  # noqa: F401 - check: the notebooks'
from .breakeven import Costs, speedup
from .model import grad_bytes


@exercise("04.1")
def _scripts_ddp_reruns(answer):
    # strategy='ddp', devices=3: rank 0 is the user's process; ranks 1 and 2 re-run the script.
    if answer == 2:
        return "right", ""
    if answer == 3:
        return "wrong", "rank 0 is the process you started yourself: Lightning re-runs the script for the others only"
    return "wrong", "count the ranks Lightning starts with subprocess.Popen: every rank but rank 0"


@exercise("04.2")
def _samples_per_rank(answer):
    return compare_number(answer, math.ceil(5000 / 3), rel_right=0.0, rel_close=0.01, what="samples per rank")


@exercise("05.1")
def _allreduces_per_epoch(answer):
    steps = math.ceil(math.ceil(5000 / 3) / 256)      # micro-steps per rank and epoch
    return compare_number(answer, math.ceil(steps / 3), rel_right=0.0, rel_close=0.34,
                          what="all-reduces per epoch")


@exercise("05.2")
def _gradient_megabytes(answer):
    return compare_number(answer, grad_bytes() / 1e6, what="gradient megabytes (1 MB = 10^6 B)")


@exercise("06.1")
def _speedup_by_hand(answer):
    c = Costs(c0=2e-3, k=0.0, latency=1e-3, bandwidth=1e9)
    return compare_number(answer, speedup(c, world_size=3), rel_right=0.02, rel_close=0.1, what="the speedup")
