"""The course's cases, one subpackage each.

A case imports the tool and the course's machinery, never another case:

intro (notebook 00: a first launch, all-reduce and timer) ; case1 (01-03: a
plain-PyTorch DDP script on 2 GPUs slower than one) ; case2 (04-06: a
Lightning test on 3 GPUs where one GPU always wins) ; own (07: a learner's
own run, and the standard tools on it). `NAMES` lists them; `registry()` gives
each one's `course.contract.Case`, which the command line and the tests read.
"""

from __future__ import annotations

import importlib

NAMES = ("intro", "case1", "case2", "own")


def registry() -> dict:
    """name -> the case's `Case` declaration (each package's `CASE`), in course order."""
    return {name: importlib.import_module(f"{__name__}.{name}").CASE for name in NAMES}
