"""Case 2 (notebooks 04-06): a Lightning test on 3 GPUs where one GPU always won.

The skeleton: options (the posted test and its fixes, by name) -> plan (options turned into one rank's
objects: the LightningModule, the Trainer, a stand-in logger) -> train (the worker `launch` runs; a
record's run made again, `results`) ; readout (records and runs as numbers, with their provenance) ;
claims (the two verdicts that can go either way) ; exercises ; cli. Its own: model (the posted MLP,
data, loss and its shape bug) ; lightning (a fit in this process; Lightning's launchers) ;
lightning_timer (the callback and comm hook that time Lightning's steps) ; posted_script (the post's
script shape, re-run by `strategy='ddp'`) and launch_cost (that launch timed apart from the fit) ;
pairs (setups in interleaved rounds) ; hook_intervals (the all-reduce hook per rank) ; nvml (the post's
NVML block) ; plain (the workload without Lightning) ; breakeven (from which size N GPUs win) ; levers
(one GPU's levers, recorded). A notebook imports this package; `case2.plots` is the tool's figures,
loaded on first use. Lightning is imported only when a fit runs.
"""

from . import breakeven, hook_intervals, nvml, pairs, plain, readout
from .breakeven import (Costs, StepModel, core_share, fit_compute, k_from_sweep, powersgd_bytes, powersgd_compressed,
                        predict, sensitivity, speedup)
from .claims import CLAIMS, breakeven_bounds, epoch_ratio_bounds, middle_half, slowest_epochs
from .launch_cost import BUILD, EPOCHS, SETUP, STARTUP, launch_s, other_ranks, parts, plot_parts, run_script
from .lightning import fit_here, fit_one, launcher_of
from .model import D_IN, grad_bytes, loss_fn, loss_shape_effect, make_dataset, mlp, param_count
from .options import Options
from .plan import make_trainer, memory_logger, quiet
from .readout import (POST_EPOCHS, EpochSplit, breakeven_share, epoch_seconds, epoch_split, expected_syncs,
                      extra_launch, launch_parts, launch_rounds, load_range, mpi_singletons, multi_gpu_records,
                      payback, per_round, ratio_line, record, record_line, recorded_medians, runs_of, spread_line)
from .train import fit_worker, results
from ...course import replay
from ...tool import allreduce, spread

from ...course.contract import Case

CASE = Case("case2", "a Lightning test on 3 GPUs where one GPU always wins",
            ("04_case2_lightning", "05_case2_where_time_goes", "06_case2_breakeven"),
            commands={"case2": "ddp_lessons.cases.case2.cli:cli_command"})


def stored_or_live(name: str, where) -> dict:
    """The `case2` record `name`, or, where `where` runs on NCCL, the same run made live on its GPUs
    (`course.replay.stored_or_live` with this case's `train.results`). Defined in notebook 05_case2_where_time_goes."""
    return replay.stored_or_live(name, results, where, kind="case2")


__all__ = ["CASE", "CLAIMS", "Options", "stored_or_live", "fit_here", "fit_one", "fit_worker", "results",
           "launcher_of", "make_trainer", "memory_logger", "quiet", "D_IN", "mlp", "param_count", "grad_bytes",
           "make_dataset", "loss_fn", "loss_shape_effect", "run_script", "parts", "launch_s", "other_ranks",
           "plot_parts", "BUILD", "EPOCHS", "SETUP", "STARTUP", "runs_of", "mpi_singletons", "extra_launch",
           "record", "record_line", "launch_rounds", "launch_parts", "load_range", "epoch_seconds",
           "payback", "breakeven_share", "epoch_split", "EpochSplit", "spread_line", "ratio_line", "per_round",
           "recorded_medians", "expected_syncs", "POST_EPOCHS",
           "multi_gpu_records", "slowest_epochs", "epoch_ratio_bounds", "breakeven_bounds", "middle_half", "Costs",
           "StepModel", "core_share", "fit_compute", "k_from_sweep", "powersgd_bytes", "powersgd_compressed",
           "predict", "sensitivity", "speedup",
           "allreduce", "spread", "breakeven", "hook_intervals", "nvml", "pairs", "plain", "readout"]


def __getattr__(name):
    # the tool's figures: matplotlib is loaded when a notebook asks, not in every worker process
    if name == "plots":
        from ...tool import plots
        return plots
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
