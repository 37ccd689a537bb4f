"""A case, declared once: what every case of the course provides, read by the CLI, the tests and the
exercises' registry (as torchtitan's `TrainSpec` and its registry).

Every case package has the same skeleton: `options` (its options and presets) · `plan` (options turned
into one rank's objects) · `train` (the worker `launch` runs) · `readout` (what the workers return, as
numbers and `Run`s) · `claims` (its verdicts, a table in notebook order) · `exercises` · `cli` (its
commands) · and modules of its own. Its `__init__` fills `CASE = Case(...)`.

To add a case: make `cases/<name>/` with that skeleton, fill its `CASE`, and add `<name>` to
`ddp_lessons.cases.NAMES`; the command line, the architecture test and the exercises' test read that list.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    """`name`: the package under `ddp_lessons.cases`; `notebooks`: its notebooks, in order; `options`:
    its Options class (presets in `Options.PRESETS`); `worker`, `claims`, `exercises`: "module:name" or
    module paths of its worker, claims table and exercises; `commands`: `python -m ddp_lessons NAME` ->
    "module:function" that adds the command's arguments and returns its runner."""
    name: str
    title: str
    notebooks: tuple
    options: object = None
    worker: str = ""
    claims: str = ""
    exercises: str = ""
    commands: dict = field(default_factory=dict)
