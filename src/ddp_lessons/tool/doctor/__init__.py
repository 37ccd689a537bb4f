"""The doctor: an unmodified DDP script timed, diagnosed and its suspicions tried, from its own command.

    python -m ddp_lessons doctor [--steps N] [--confirm] -- torchrun --standalone --nproc_per_node 2 train.py
    ddp_lessons.doctor(["torchrun", "--standalone", "--nproc_per_node", "2", "train.py"], steps=20)

command (the user's command: checked, run with the rank half in its processes, results read back) ;
wire (what the two halves share: settings, knobs, end reasons, the rank file) ; rank (the rank half:
what is patched in those processes, the recorder) ; bootstrap (the sitecustomize that installs it) ;
confirm (`--confirm`: one knob changed, in paired rounds) ; report (what it prints) ; cli (`python -m
ddp_lessons doctor`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from .. import records
from ..diagnosis import diagnose
from ..runs import Run
from . import command as cmd
from . import confirm as knobs_
from . import wire
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
    ranked: list = field(default_factory=list)
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
           confirm_steps: int | None = None, knobs=(), record: str | None = None, runs_dir=None,
           capture: bool = False, timeout: float | None = None, profile_steps: int = 5, log=sys.stderr) -> Checkup:
    """Time the unmodified `command` (a list, as you would type it: `["torchrun", "--standalone",
    "--nproc_per_node", "2", "train.py"]`), diagnose it, and save the run as a record (`record`: its
    name; default doctor-<script>-<time>, in `runs_dir` or ./runs). `steps`: stop after `warmup` + `steps`
    optimizer steps. `confirm`: run the command again with each printed finding's knob changed, `rounds`
    interleaved rounds of `confirm_steps` optimizer steps (None: as many as the run's spread needs to
    resolve a 3% saving); `knobs`: more knobs to try ("ddp.bucket_cap_mb=50"). `profile_steps`: on a GPU,
    optimizer steps after the warm-up profiled for the GPU's busy share (0: none). `capture`: keep the
    command's output in `.stdout` instead of letting it through.
    Defined in notebook 07_diagnose_your_own_run."""
    command = [str(a) for a in command]   # paths too
    argv = cmd.resolve(command)
    extra = [knobs_.parse(k) for k in knobs]
    ran = cmd.run(argv, steps, warmup, {}, timeout, capture, profile=profile_steps)
    run = Run(ran.ranks, name="doctor") if ran.ranks else None
    found = diagnose(run) if run is not None else None
    interrupted = ran.interrupted or any((r.get("doctor") or {}).get("reason") == wire.INTERRUPTED for r in ran.ranks)
    up = Checkup(list(command), ran.returncode, ran.seconds, run, found, stdout=ran.stdout, interrupted=interrupted,
                 settings={"steps": steps, "warmup": warmup, "profile_steps": profile_steps})
    if run is not None and (confirm or extra):
        plan = (knobs_.plan(found, run) if confirm else []) + extra
        n, why = (confirm_steps, f"{confirm_steps} optimizer steps a round (--confirm-steps)") if confirm_steps \
            else knobs_.choose_steps(run)
        if plan:
            up.confirmed = knobs_.rounds(argv, plan, rounds, n, warmup, timeout=max(60.0, 10 * ran.seconds), log=log)
            up.ranked = knobs_.ranked(found, up.confirmed)
        up.settings.update(rounds=rounds, confirm_steps=n, steps_why=why, knobs_planned=[k.name for k in plan])
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
               "confirmed": up.confirmed, "ranked": up.ranked, "interrupted": up.interrupted}
    rec = records.make_record("doctor", config, results, backend=up.run.backend)
    return records.save(rec, name, runs_dir=runs_dir)
