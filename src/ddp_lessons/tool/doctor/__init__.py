"""The doctor: an unmodified DDP script timed, diagnosed and its suspicions tried, from its own command.

    python -m ddp_lessons doctor [--steps N] [--confirm] -- torchrun --standalone --nproc_per_node 2 train.py
    ddp_lessons.doctor(["torchrun", "--standalone", "--nproc_per_node", "2", "train.py"], steps=20)

command (the user's command: checked, run with the recorder in its processes, results read back) ;
bootstrap (the sitecustomize that installs it) ; inject (what is patched, in those processes only) ;
recorder (torch's hooks into a StepTimer's steps) ; confirm (`--confirm`: one knob changed, in paired
rounds) ; report (what it prints) ; cli (`python -m ddp_lessons doctor`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from .. import records
from ..diagnosis import diagnose
from ..runs import Run
from . import command as cmd
from . import confirm as knobs_
from .command import DoctorError

__all__ = ["doctor", "Checkup", "DoctorError"]


@dataclass
class Checkup:
    """What the doctor found: `returncode` and `seconds` of the command, `run` (a `Run` of every rank
    it timed; None if none was), `diagnosis`, `confirmed` (each knob tried: its rounds and verdict),
    `record` (the saved record's path), `stdout` (the command's output where it was captured)."""
    command: list
    returncode: int
    seconds: float
    run: Run | None
    diagnosis: object = None
    confirmed: list = field(default_factory=list)
    record: str | None = None
    stdout: str | None = None
    interrupted: bool = False
    settings: dict = field(default_factory=dict)

    def __str__(self) -> str:
        from .report import text
        return text(self)

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def doctor(command, steps: int | None = None, warmup: int = 3, confirm: bool = False, rounds: int = 5,
           confirm_steps: int = 20, knobs=(), record: str | None = None, runs_dir=None, capture: bool = False,
           timeout: float | None = None, log=sys.stderr) -> Checkup:
    """Time the unmodified `command` (a list, as you would type it: `["torchrun", "--standalone",
    "--nproc_per_node", "2", "train.py"]`), diagnose it, and save the run as a record (`record`: its
    name; default doctor-<script>-<time>, in `runs_dir` or ./runs). `steps`: stop after `warmup` + `steps`
    optimizer steps. `confirm`: run the command again with each suspicion's knob changed, `rounds`
    interleaved rounds of `confirm_steps` steps; `knobs`: more knobs to try ("ddp.bucket_cap_mb=50").
    `capture`: keep the command's output in `.stdout` instead of letting it through.
    Defined in notebook 07_diagnose_your_own_run."""
    command = [str(a) for a in command]   # paths too
    argv = cmd.resolve(command)
    extra = [knobs_.parse(k) for k in knobs]
    ran = cmd.run(argv, steps, warmup, {}, timeout, capture)
    run = Run(ran.ranks, name="doctor") if ran.ranks else None
    found = diagnose(run) if run is not None else None
    up = Checkup(list(command), ran.returncode, ran.seconds, run, found, stdout=ran.stdout, interrupted=ran.interrupted,
                 settings={"steps": steps, "warmup": warmup})
    if run is not None and (confirm or extra):
        plan = (knobs_.plan(found, run) if confirm else []) + extra
        if plan:
            up.confirmed = knobs_.rounds(argv, plan, rounds, confirm_steps, warmup,
                                         timeout=max(60.0, 10 * ran.seconds), log=log)
        up.settings.update(rounds=rounds, confirm_steps=confirm_steps)
    if run is not None:
        up.record = str(_save(up, record, runs_dir))
    return up


def _save(up: Checkup, name: str | None, runs_dir):
    assert up.run is not None
    import os
    import time
    script = next((a for a in up.command if a.endswith(".py")), up.command[0])
    name = name or f"doctor-{os.path.splitext(os.path.basename(script))[0]}-{time.strftime('%Y%m%d-%H%M%S')}"
    config = {"command": up.command, **up.settings}
    results = {"ranks": [r.timer for r in up.run], "returncode": up.returncode, "seconds": up.seconds,
               "confirmed": up.confirmed, "interrupted": up.interrupted}
    rec = records.make_record("doctor", config, results, backend=up.run.backend)
    return records.save(rec, name, runs_dir=runs_dir)
