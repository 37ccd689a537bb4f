"""Case 2's posted test in Lightning, fitted in this process: `fit_here` (one device, or workers Lightning
forks with `ddp_notebook`), `fit_one` (one device, kept out of this process on a GPU machine), and how
Lightning starts the ranks of each strategy (`launcher_of`). Defined in notebook 04_case2_lightning.
"""

from __future__ import annotations

import os
import time

from ...tool.ddp import gradient_bytes
from .options import Options
from .plan import FLUSH_EVERY, make_trainer, module_classes, quiet


def launcher_of(strategy: str) -> str:
    """The class Lightning starts the ranks of `strategy` with, and its start method (nothing is started;
    no Trainer is built, so it answers in a notebook too): 'ddp' re-runs the user's script per extra rank
    (`subprocess.Popen`), 'ddp_spawn' spawns fresh Pythons, 'ddp_notebook' forks.
    Defined in notebook 04_case2_lightning."""
    from lightning_fabric.plugins.environments import LightningEnvironment
    from pytorch_lightning.strategies import StrategyRegistry
    made = StrategyRegistry.get(strategy)
    made.cluster_environment = LightningEnvironment()
    made._configure_launcher()  # what the Trainer calls: the launcher for this strategy's start method
    return f"{type(made.launcher).__name__} ({made._start_method})"


def fit(opts, trainer, timed) -> dict:
    """One fit of the posted test with `trainer`: wall time, counts, flushes, and `timed`'s result."""
    SimpleModel, SimpleDataModule = module_classes()
    import torch
    torch.manual_seed(opts.seed)
    model, data = SimpleModel(opts), SimpleDataModule(opts)
    stamp, t0 = time.time(), time.perf_counter()  # the wall clock: comparable with other processes' stamps
    trainer.fit(model, data)
    wall = time.perf_counter() - t0
    out = {"wall": wall, "t_fit_start": stamp, "t_fit_end": stamp + wall,
           "nvml_calls": model.nvml_calls, "log_rows": len(trainer.logger.rows), "flush_s": trainer.logger.flush_s,
           "optimizer_steps": trainer.global_step, "world_size": trainer.world_size,
           "rank": trainer.global_rank, "pid": os.getpid(), "ppid": os.getppid(),
           "grad_bytes": gradient_bytes(model)}
    if timed is not None:
        out["timer"] = timed.result()
    return out


def fit_here(opts: Options, devices: int = 1, strategy="auto", accelerator="cpu", timed: bool = True,
             flush_every: int = FLUSH_EVERY):
    """Fit in this process (devices=1) or with a strategy that starts workers
    itself ('ddp_notebook': Lightning forks them). Returns wall time, counts and
    (timed, in this process only) the callback's per-step numbers. Defined in notebook 05_case2_where_time_goes."""
    from .lightning_timer import StepTimerCallback
    cb = StepTimerCallback("cuda" if accelerator == "gpu" else "cpu") if timed else None
    with quiet():
        trainer = make_trainer(opts, accelerator, devices, strategy, [cb] if cb else [], flush_every=flush_every)
        return fit(opts, trainer, cb)


def fit_one(opts: Options, where, timed: bool = False) -> dict:
    """One device of `where`'s kind (a `launcher.Placement`), fitted so that this process can still
    fork: here where no GPU is visible; else in one process forked by the launcher (world size 1).
    On a GPU machine Lightning saves and restores the CUDA RNG state around every stage
    (`isolate_rng`), which initialises CUDA in this process, and workers forked after it fail with
    "Cannot re-initialize CUDA in forked subprocess". Defined in notebook 05_case2_where_time_goes."""
    if where.gpus_visible == 0:
        return fit_here(opts, devices=1, accelerator=where.accelerator, timed=timed)
    from ...tool.launcher import launch  # the launcher is needed only on a GPU machine
    return launch(fit_here, (opts,), dict(devices=1, accelerator=where.accelerator, timed=timed),
                  world_size=1, backend=where.backend, start_method="fork")[0]
