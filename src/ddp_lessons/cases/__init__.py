"""The course's cases, one subpackage each.

A case imports the tool and the course's machinery, never another case:

intro (notebook 00: a first launch, all-reduce and timer) ; case1 (01-03: a
plain-PyTorch DDP script on 2 GPUs slower than one) ; case2 (04-06: a
Lightning test on 3 GPUs where one GPU always wins) ; own (07: a learner's
own run, and the standard tools on it). `NAMES` lists them; `registry()` gives
each one's `course.contract.Case`, which the command line and the tests read;
`problems(name)` says what a case lacks against the contract's recipe.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from ..course.contract import SKELETON, Case

NAMES = ("intro", "case1", "case2", "own")


def registry() -> dict:
    """name -> the case's `Case` declaration (each package's `CASE`), in course order."""
    return {name: importlib.import_module(f"{__name__}.{name}").CASE for name in NAMES}


def problems(name: str, package: str = __name__, notebooks: Path | None = None) -> list[str]:
    """What case `name` lacks against `course.contract`'s recipe: skeleton modules, its `CASE` (named as its
    package, with notebooks and commands that resolve), its notebooks' sources (where `notebooks`, the
    folder holding `src/`, is given). Empty for a case that follows it."""
    out = []
    mod = importlib.import_module(f"{package}.{name}")
    for m in SKELETON:
        if importlib.util.find_spec(f"{package}.{name}.{m}") is None:
            out.append(f"module {m} (the skeleton: {', '.join(SKELETON)})")
    case = getattr(mod, "CASE", None)
    if not isinstance(case, Case):
        return out + ["CASE = Case(...) in its __init__"]
    if case.name != name:
        out.append(f"CASE.name {case.name!r} is not its package's name {name!r}")
    if not case.notebooks:
        out.append("CASE.notebooks: at least one notebook")
    for nb in case.notebooks if notebooks is not None else ():
        if not (Path(notebooks) / "src" / f"{nb}.py").exists():
            out.append(f"notebook source notebooks/src/{nb}.py")
    for command, target in case.commands.items():
        module, _, fn = target.partition(":")
        if not hasattr(importlib.import_module(module), fn):
            out.append(f"command {command}: {target} does not resolve")
    return out
