"""A case, declared once: what every case of the course provides, as torchtitan's `TrainSpec` and its
registry. `Case` holds what code reads (the registry, the command line, the notebook scripts); the rest
is the skeleton every case has, found by its module names. `RECIPE` is the whole recipe for a new case;
`ddp_lessons.cases.problems(name)` says what a case lacks against it (tests/course/test_contract.py
follows it with a toy case).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SKELETON = ("options", "plan", "train", "readout", "claims", "exercises", "cli")
RECIPE = (
    "`src/ddp_lessons/cases/<name>/` with the skeleton SKELETON: options (its options and presets), plan (options "
    "into one rank's objects), train (the worker `launch` runs), readout (what the workers return, as numbers and "
    "`Run`s), claims (its verdicts, a table in notebook order), exercises (registered with "
    "`course.exercises.exercise`, handing the notebook `check`), cli (its commands); it imports the tool and the "
    "course, never another case (tests/repo/test_architecture.py)",
    "`CASE = Case(...)` in its `__init__`, and its name in `ddp_lessons.cases.NAMES`",
    "its notebooks as `notebooks/src/NN_<name>.py` (jupytext percent), each opening with its answer and at most 3 "
    "package imports (tests/repo/test_notebook_rules.py), built with `make notebooks NB=...`",
    "its modules named in its package docstring (`python scripts/layout.py --write` updates the README)",
    "its tests in `tests/cases/<name>/`, one per verdict that makes it come out the other way",
)


@dataclass(frozen=True)
class Case:
    """`name`: the package under `ddp_lessons.cases` (the registry's key); `title`: what it is, in a line
    (the command line's help for its commands); `notebooks`: its notebooks, in order (the command line
    names them; scripts/notebooks.py builds in the registry's order); `commands`: `python -m ddp_lessons
    NAME` -> "module:function" that adds the command's arguments and returns its runner."""
    name: str
    title: str
    notebooks: tuple
    commands: dict = field(default_factory=dict)

    def describe(self) -> str:
        """One line for the command line's help: the title and the notebooks."""
        return f"{self.title} (notebooks {', '.join(self.notebooks)})"
