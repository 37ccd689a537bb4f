"""Case 2: the posted Lightning test, rebuilt, with a named option for every fix.

`Options()` is the test as posted (batch 256, 5,000 samples drawn with `torch.randn` in `__getitem__`,
validation over all of them every epoch, `self.log` every step, NVML init/query/shutdown in every step,
`accumulate_grad_batches=3`); `Options.fixed()` switches each of those off one by one, by name. The
posted `WandbLogger` is replaced by `memory_logger()`. Three ways to run it: `fit_here` / `fit_one` (in
this process, or with workers Lightning forks), `fit_worker` (a worker for `ddp_lessons.launch`), and
`python -m ddp_lessons case2 ...` (see `cli_command`). Defined in notebook 04_case2_lightning.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import warnings

import torch
from torch.utils.data import DataLoader

from ...tool import runtime
from ...tool.ddp import gradient_bytes
from .model import loss_fn, make_dataset, mlp
from . import nvml
from .options import Options


# -- the posted code, with options --------------------------------------------
def _module_classes():
    import pytorch_lightning as pl

    class SimpleModel(pl.LightningModule):
        def __init__(self, opts: Options):
            super().__init__()
            self.opts = opts
            self.net = mlp(opts.width, opts.depth)
            self.nvml_calls = 0

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = loss_fn(self(x), y, self.opts)
            if self.opts.log_every_step or batch_idx % self.opts.log_every == 0:
                self.log("train_loss", loss)
            if self.opts.nvml == "step":
                self.nvml_calls += 1
                for i, util in enumerate(nvml.utilisation()):
                    self.log(f"gpu_{i}_utilization", float(util))
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            loss = loss_fn(self(x), y, self.opts)
            self.log("val_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=self.opts.lr)

    class SimpleDataModule(pl.LightningDataModule):
        def __init__(self, opts: Options):
            super().__init__()
            self.opts = opts

        def setup(self, stage=None):
            self.dataset = make_dataset(self.opts)

        def train_dataloader(self):
            return DataLoader(self.dataset, batch_size=self.opts.batch_size, shuffle=True)

        def val_dataloader(self):
            return DataLoader(self.dataset, batch_size=self.opts.batch_size)

    return SimpleModel, SimpleDataModule


def memory_logger():
    """An offline stand-in for the post's WandbLogger: metrics kept in memory, a row per call
    (so it counts its calls)."""
    from pytorch_lightning.loggers import Logger

    class MemoryLogger(Logger):
        def __init__(self):
            super().__init__()
            self.rows = []

        name = property(lambda self: "memory")
        version = property(lambda self: 0)

        def log_metrics(self, metrics, step=None):
            self.rows.append((step, dict(metrics)))

        def log_hyperparams(self, params, *args, **kwargs):
            pass

    return MemoryLogger()


@contextlib.contextmanager
def quiet():
    """Silence Lightning's banners and hints (GPU available..., PossibleUserWarning)."""
    names = ("lightning.pytorch", "pytorch_lightning", "lightning_fabric", "lightning.fabric")
    levels = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            for n, lvl in levels.items():
                logging.getLogger(n).setLevel(lvl)


def make_trainer(opts: Options, accelerator="cpu", devices=1, strategy="auto", callbacks=(), logger=None):
    import pytorch_lightning as pl
    return pl.Trainer(
        accelerator=accelerator, devices=devices, num_nodes=1, strategy=strategy,
        max_epochs=opts.epochs, accumulate_grad_batches=opts.accumulate,
        logger=logger if logger is not None else memory_logger(), callbacks=list(callbacks),
        limit_train_batches=opts.train_batches, limit_val_batches=opts.val_batches if opts.val_every else 0,
        check_val_every_n_epoch=opts.val_every or 1, num_sanity_val_steps=0,
        log_every_n_steps=1 if opts.log_every_step else opts.log_every,
        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
        deterministic=False)


def _fit(opts, trainer, timed):
    SimpleModel, SimpleDataModule = _module_classes()
    torch.manual_seed(opts.seed)
    model, data = SimpleModel(opts), SimpleDataModule(opts)
    stamp, t0 = time.time(), time.perf_counter()  # the wall clock: comparable with other processes' stamps
    trainer.fit(model, data)
    wall = time.perf_counter() - t0
    out = {"wall": wall, "t_fit_start": stamp, "t_fit_end": stamp + wall,
           "nvml_calls": model.nvml_calls, "log_rows": len(trainer.logger.rows),
           "optimizer_steps": trainer.global_step, "world_size": trainer.world_size,
           "rank": trainer.global_rank, "pid": os.getpid(), "ppid": os.getppid(),
           "grad_bytes": gradient_bytes(model)}
    if timed is not None:
        out["timer"] = timed.result()
    return out


def fit_here(opts: Options, devices: int = 1, strategy="auto", accelerator="cpu", timed: bool = True):
    """Fit in this process (devices=1) or with a strategy that starts workers
    itself ('ddp_notebook': Lightning forks them). Returns wall time, counts and
    (timed, in this process only) the callback's per-step numbers. Defined in notebook 04_case2_lightning."""
    from .lightning_timer import StepTimerCallback
    cb = StepTimerCallback("cuda" if accelerator == "gpu" else "cpu") if timed else None
    with quiet():
        trainer = make_trainer(opts, accelerator, devices, strategy, [cb] if cb else [])
        return _fit(opts, trainer, cb)


def fit_one(opts: Options, where, timed: bool = False) -> dict:
    """One device of `where`'s kind (a `launcher.Placement`), fitted so that
    this process can still fork: here where no GPU is visible; else in one
    process forked by the launcher (world size 1, `where.backend`).

    Why not here on a GPU machine: Lightning saves and restores the CUDA RNG
    state around every stage wherever CUDA is available, a CPU fit included
    (`isolate_rng`), and that initialises CUDA in this process; every worker
    forked after it (`ddp_notebook`'s) then fails with "Cannot re-initialize
    CUDA in forked subprocess" (seen on an H200 with the fit on the CPU). Defined in notebook 04_case2_lightning."""
    if where.gpus_visible == 0:
        return fit_here(opts, devices=1, accelerator=where.accelerator, timed=timed)
    from ...tool.launcher import launch  # the launcher is needed only on a GPU machine
    return launch(fit_here, (opts,), dict(devices=1, accelerator=where.accelerator, timed=timed),
                  world_size=1, backend=where.backend, start_method="fork")[0]


def fit_worker(opts: Options, accelerator: str | None = None, timed: bool = True) -> dict:
    """Worker for `launch`/torchrun: one rank of a Lightning DDP fit.

    The launcher has set RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    and initialised torch.distributed: LOCAL_RANK makes Lightning's
    LightningEnvironment report `creates_processes_externally`, so it starts no
    process, and the already-initialised group is reused, not created again.
    `accelerator`: None follows the process group (gpu under NCCL, cpu under
    gloo); one that contradicts it is refused (ValueError), not run elsewhere.
    Defined in notebook 04_case2_lightning."""
    entered = time.time()  # the launcher has started this process and joined the process group
    import torch.distributed as dist

    accelerator = runtime.accelerator(accelerator)  # before Lightning's import: refuse at once
    from .lightning_timer import StepTimerCallback, timed_strategy
    group_before = dist.distributed_c10d._get_default_group() if dist.is_initialized() else None
    dev = "cuda" if accelerator == "gpu" else "cpu"
    cb = StepTimerCallback(dev)
    strategy = timed_strategy(cb) if timed else _plain_strategy()
    with quiet():
        trainer = make_trainer(opts, accelerator, runtime.world_size(), strategy, [cb])
        env = trainer.strategy.cluster_environment
        out = _fit(opts, trainer, cb)
    out.update(external=env.creates_processes_externally, accelerator=accelerator,
               same_group=group_before is not None and dist.distributed_c10d._get_default_group() is group_before,
               children=_child_processes(), t_entered=entered, t_created=_created())
    return out


def _created() -> float | None:
    """When this process was created (wall clock, s; psutil's clock-tick resolution); None without psutil."""
    try:
        import psutil
    except ImportError:
        return None
    return psutil.Process().create_time()


def _plain_strategy():
    from pytorch_lightning.strategies import DDPStrategy
    return DDPStrategy()


def _child_processes():
    """Processes this rank started and still has, each as 'name: command line'
    (shortened); None without psutil. A Lightning launcher would show here as
    Python processes running this rank's script or multiprocessing's spawn."""
    try:
        import psutil
    except ImportError:
        return None
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
            name = p.name()
        except psutil.Error:  # gone, or not ours to read: nothing left to count
            continue
        if "resource_tracker" not in cmd:
            out.append(f"{name}: {cmd[:160]}")
    return out
