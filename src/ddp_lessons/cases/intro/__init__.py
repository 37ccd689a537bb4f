"""Notebook 00: a first launch, a first all-reduce, a first timed DDP model.

options (the timed MLP's and the all-reduce sweep's settings, checked) ->
plan (the options turned into one rank's model, optimizer, batches and hook)
-> train (the worker that trains and times it; the recorded timer-overhead
run made again on GPUs) ; workers (a first all-reduce, a failing rank,
`train_mlp` for the tool's tests) ; readout (the sweep, the two clocks, a
known delay, the timer's and the doctor's recorded cost, read back as numbers) ; claims
(00's claims, a table) ; sockets (which sockets a rank listens on) ;
exercises ; cli (the foundation's commands).
"""

from . import claims, options, readout, train, workers
from .claims import CLAIMS
from .exercises import check
from .options import Options, Sweep

from ...course.contract import Case

CASE = Case("intro", "a first launch, a first all-reduce, a first timed DDP model", ("00_first_launch",),
            commands={"info": "ddp_lessons.cases.intro.cli:info_command",
                      "hello": "ddp_lessons.cases.intro.cli:hello_command",
                      "allreduce": "ddp_lessons.cases.intro.cli:allreduce_command",
                      "train-mlp": "ddp_lessons.cases.intro.cli:train_mlp_command",
                      "error-demos": "ddp_lessons.cases.intro.cli:error_demos_command"})

__all__ = ["CASE", "CLAIMS", "Options", "Sweep", "check", "claims", "options", "readout", "train", "workers"]
