"""Case 2 (notebooks 04-06): a PyTorch Lightning test on 3 GPUs where one GPU
always wins, rebuilt with a named option for every fix.

options -> model (the posted MLP, data, loss) -> lightning (the posted test:
`fit_here` in this process, `fit_one` on one device leaving this process
fork-safe, `fit_worker` under `launch` or torchrun) ;
timing (the callback and comm hook that time Lightning's steps) ; nvml (the
post's per-step NVML block) ; plain (the same workload without Lightning) ;
breakeven (from which size on N workers win; N GPUs against the fastest
one-GPU step) ; levers, levers_record (one GPU's real levers timed in
interleaved rounds: benchmarks/case2_levers.py) ; replay (a recorded GPU run
made again on this machine's GPU: `rerun`) ; rounds (two setups timed in
interleaved rounds) ; hookread (the all-reduce hook's interval, per rank) ;
claims, claims_breakeven (the notebooks' verdicts: 04-05, 06) ; exercises ; cli.
Lightning itself is imported only when a fit runs.
"""

from .lightning import fit_here, fit_one, fit_worker, make_trainer, memory_logger, quiet
from .model import D_IN, grad_bytes, loss_fn, make_dataset, mlp, param_count
from . import nvml
from .options import Options
from .replay import rerun

__all__ = ["Options", "fit_here", "fit_one", "fit_worker", "make_trainer", "memory_logger", "quiet",
           "D_IN", "mlp", "param_count", "grad_bytes", "make_dataset", "loss_fn",
           "nvml", "rerun"]
