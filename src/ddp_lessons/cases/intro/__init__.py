"""Notebook 00: a first launch, a first all-reduce, a first timed DDP model.

workers (a first all-reduce, a failing rank, a small timed DDP model) ;
sockets (which sockets a rank listens on) ; verdicts (00's conclusions
decided by the numbers) ; replay (the recorded timer-overhead runs made again
on this machine's GPUs) ; exercises ; cli (the foundation's commands).
"""

from ...course.contract import Case

CASE = Case("intro", "a first launch, a first all-reduce, a first timed DDP model", ("00_first_launch",),
            worker="ddp_lessons.cases.intro.workers:train_mlp", claims="ddp_lessons.cases.intro.verdicts",
            exercises="ddp_lessons.cases.intro.exercises",
            commands={"info": "ddp_lessons.cases.intro.cli:info_command",
                      "hello": "ddp_lessons.cases.intro.cli:hello_command",
                      "allreduce": "ddp_lessons.cases.intro.cli:allreduce_command",
                      "train-mlp": "ddp_lessons.cases.intro.cli:train_mlp_command",
                      "error-demos": "ddp_lessons.cases.intro.cli:error_demos_command"})
