"""Case 2 (notebooks 04-06): a Lightning test on 3 GPUs where one GPU always wins.

Rebuilt with a named option for every fix:

options -> model (the posted MLP, data, loss) -> lightning (the posted test:
`fit_here` in this process, `fit_one` on one device, `fit_worker` under
`launch` or torchrun) ; lightning_timer (the callback and comm hook that time
Lightning's steps) ; hook_intervals (that hook's interval, per rank) ; nvml
(the post's per-step NVML block) ; plain (the workload without Lightning) ;
rounds (two setups in interleaved rounds) ; breakeven (from which size N
workers win) ; levers (one GPU's real levers) ; verdicts (04-06's
conclusions decided by the numbers) ; replay (a recorded GPU run made again
here: `rerun`) ; exercises ; cli. Lightning is imported only when a fit runs.
"""

from .lightning import fit_here, fit_one, fit_worker, make_trainer, memory_logger, quiet
from .model import D_IN, grad_bytes, loss_fn, make_dataset, mlp, param_count
from . import nvml
from .options import Options
from .replay import rerun

from ...course.contract import Case

CASE = Case("case2", "a Lightning test on 3 GPUs where one GPU always wins",
            ("04_case2_lightning", "05_case2_where_time_goes", "06_case2_breakeven"), options=Options,
            worker="ddp_lessons.cases.case2.lightning:fit_worker", claims="ddp_lessons.cases.case2.verdicts",
            exercises="ddp_lessons.cases.case2.exercises",
            commands={"case2": "ddp_lessons.cases.case2.cli:cli_command"})

__all__ = ["CASE", "Options", "fit_here", "fit_one", "fit_worker", "make_trainer", "memory_logger", "quiet",
           "D_IN", "mlp", "param_count", "grad_bytes", "make_dataset", "loss_fn",
           "nvml", "rerun"]
