"""Case 2's runs: the worker `launch` runs (`fit_worker`: one rank of the posted test's Lightning DDP fit,
in the launcher's processes and process group), and every run a `case2` record describes, made again
on a placement (`results`: what `python -m ddp_lessons case2` records and what
`course.replay.stored_or_live` makes live on a GPU machine). Defined in notebook 05_case2_where_time_goes.
"""

from __future__ import annotations

import time

from ...tool import runtime
from .lightning import fit, fit_here
from .options import Options
from .plan import make_trainer, quiet
from . import nvml, plain

SWEEP = {"widths": [64, 256, 1024, 2048, 4096, 8192], "steps": 60}  # benchmarks/record_case2_gpu.sh


def fit_worker(opts: Options, accelerator: str | None = None, timed: bool = True) -> dict:
    """Worker for `launch`/torchrun: one rank of a Lightning DDP fit.

    The launcher has set RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and initialised
    torch.distributed: LOCAL_RANK makes Lightning's LightningEnvironment report
    `creates_processes_externally`, so it starts no process, and it keeps the initialised group.
    `accelerator`: None follows the process group (gpu under NCCL, cpu under gloo); one that
    contradicts it is refused (ValueError). Defined in notebook 05_case2_where_time_goes."""
    entered = time.time()  # the launcher has started this process and joined the process group
    import torch.distributed as dist

    accelerator = runtime.accelerator(accelerator)  # before Lightning's import: refuse at once
    from .lightning_timer import StepTimerCallback, timed_strategy
    group_before = dist.distributed_c10d._get_default_group() if dist.is_initialized() else None
    cb = StepTimerCallback("cuda" if accelerator == "gpu" else "cpu")
    if timed:
        strategy = timed_strategy(cb)
    else:
        from pytorch_lightning.strategies import DDPStrategy
        strategy = DDPStrategy()
    with quiet():
        trainer = make_trainer(opts, accelerator, runtime.world_size(), strategy, [cb])
        env = trainer.strategy.cluster_environment
        out = fit(opts, trainer, cb)
    out.update(external=env.creates_processes_externally, accelerator=accelerator,
               same_group=group_before is not None and dist.distributed_c10d._get_default_group() is group_before,
               children=_child_processes(), t_entered=entered)
    return out


def _child_processes():
    """Processes this rank started and still has (a Lightning launcher would show here); None without psutil."""
    try:
        import psutil
    except ImportError:
        return None
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
        except psutil.Error:  # gone, or not ours to read: nothing left to count
            continue
        if "resource_tracker" not in cmd:
            out.append(cmd[:160])
    return out


def results(config: dict, where) -> dict:
    """The run a `case2` record's `config` describes (`mode`: posted, fixed, nvml, sweep; `launch`: on
    `where.world_size` workers), made on `where`'s devices; one-process modes run in this process.
    Defined in notebook 05_case2_where_time_goes."""
    from ...tool.launcher import launch
    mode, acc = config["mode"], where.accelerator
    opts = Options(**config["options"]) if "options" in config else Options.preset(
        "posted" if mode == "posted" else "fixed")
    if mode == "nvml":
        return nvml.costs(config.get("repeats") or 100)
    if mode == "sweep":
        widths, steps = config.get("widths") or SWEEP["widths"], config.get("steps") or SWEEP["steps"]
        return {"rows": plain.compute_sweep(opts, widths, acc, steps)}
    if config.get("launch"):
        out = {"lightning": launch(fit_worker, (opts, acc), world_size=where.world_size, backend=where.backend,
                                   timeout=600)}
        if mode == "fixed":
            out["plain"] = launch(plain.fit, (opts, acc), world_size=where.world_size, backend=where.backend,
                                  timeout=600)
        return out
    out = {"lightning": [fit_here(opts, 1, accelerator=acc)]}
    if mode == "fixed":
        out["plain"] = [plain.fit(opts, acc)]
    return out
