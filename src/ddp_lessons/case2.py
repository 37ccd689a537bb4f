"""Case 2: the posted Lightning test, rebuilt, with a named option for every fix.

`Options()` is the test as posted (batch 256, 5,000 samples drawn with
`torch.randn` in `__getitem__`, validation over all of them every epoch,
`self.log` every step, NVML init/query/shutdown in every step,
`accumulate_grad_batches=3`); `Options.fixed()` switches each of those off
one by one, by name. The posted `WandbLogger` is replaced by `MemoryLogger`,
an offline logger that keeps the metrics in memory and counts its calls.

Three ways to run it:
- `fit_here(opts, devices=1)`: in this process (devices=1), or with
  `strategy='ddp_notebook'` (Lightning forks the workers itself);
- `fit_worker(opts)`: a worker for `ddp_lessons.launch`; the launcher starts
  the processes and initialises torch.distributed, Lightning reuses it;
- `python -m ddp_lessons case2 ...` (see `cli_command`).
Defined in notebook 04_case2_lightning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from .case2_breakeven import D_IN, mlp, param_count  # noqa: F401 - the post's model, sized


@dataclasses.dataclass
class Options:
    """One run of the case-2 test. The defaults are the posted script's."""
    batch_size: int = 256
    size: int = 5000              # samples in the dataset
    epochs: int = 200
    accumulate: int = 3           # accumulate_grad_batches
    width: int = 256
    depth: int = 3                # hidden layers (the post: fc1..fc3)
    randn_in_getitem: bool = True  # False: the data made once, as tensors
    fix_loss_shape: bool = False  # the post's MSELoss broadcasts (B,1,1) against (B,1) to (B,B,1)
    nvml: str = "step"            # "step": init/query/shutdown in every training_step; "off"
    log_every_step: bool = True   # False: self.log only every `log_every` steps
    log_every: int = 50
    val_every: int = 1            # validate every N epochs (0: never)
    val_batches: float | int = 1.0  # limit_val_batches (1.0: all 5,000 samples)
    train_batches: float | int = 1.0  # limit_train_batches (short lessons)
    lr: float = 0.01
    seed: int = 0

    @classmethod
    def fixed(cls, **kw) -> "Options":
        """The fixed test: tensors made once, no NVML, logging and validation rarely."""
        base = dict(randn_in_getitem=False, fix_loss_shape=True, nvml="off",
                    log_every_step=False, val_every=0, accumulate=1)
        return cls(**(base | kw))

    def replace(self, **kw) -> "Options":
        return dataclasses.replace(self, **kw)


# -- the posted code, with options --------------------------------------------
class SimpleDataset(Dataset):
    """As posted: every item is a fresh `torch.randn`, drawn in the loader's loop."""

    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, idx):
        return torch.randn(1, D_IN), torch.randn(1)


def make_dataset(opts: Options) -> Dataset:
    if opts.randn_in_getitem:
        return SimpleDataset(opts.size)
    g = torch.Generator().manual_seed(opts.seed)  # made once, as two tensors
    return TensorDataset(torch.randn(opts.size, 1, D_IN, generator=g), torch.randn(opts.size, 1, generator=g))


def nvml_utilisation() -> list[int]:
    """The post's per-step block: NVML init, one query per GPU, shutdown."""
    import pynvml
    pynvml.nvmlInit()
    try:
        return [pynvml.nvmlDeviceGetUtilizationRates(pynvml.nvmlDeviceGetHandleByIndex(i)).gpu
                for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()


def nvml_error() -> str | None:
    """None where NVML works; else the exception NVML raises, as `Type: message`."""
    try:
        nvml_utilisation()
    except Exception as exc:  # noqa: BLE001 - the point is to show what it raises
        return f"{type(exc).__name__}: {exc}"
    return None


def loss_fn(pred, y, opts: Options):
    if opts.fix_loss_shape:
        pred = pred.squeeze(-1)  # (B,1,1) -> (B,1), the target's shape
    with warnings.catch_warnings():  # "target size different to input size": the post's bug
        warnings.simplefilter("ignore", UserWarning)
        return nn.functional.mse_loss(pred, y)


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
                for i, util in enumerate(nvml_utilisation()):
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
    """An offline stand-in for the post's WandbLogger: metrics kept in a list."""
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
    t0 = time.perf_counter()
    trainer.fit(model, data)
    wall = time.perf_counter() - t0
    out = {"wall": wall, "nvml_calls": model.nvml_calls, "log_rows": len(trainer.logger.rows),
           "optimizer_steps": trainer.global_step, "world_size": trainer.world_size,
           "rank": trainer.global_rank, "pid": os.getpid(), "ppid": os.getppid(),
           "grad_bytes": sum(p.numel() * p.element_size() for p in model.parameters())}
    if timed is not None:
        out["times"] = timed.result()
    return out


def fit_here(opts: Options, devices: int = 1, strategy="auto", accelerator="cpu", timed: bool = True):
    """Fit in this process (devices=1) or with a strategy that starts workers
    itself ('ddp_notebook': Lightning forks them). Returns wall time, counts and
    (timed, in this process only) the callback's per-step numbers."""
    from .case2_timing import StepTimerCallback
    cb = StepTimerCallback("cuda" if accelerator == "gpu" else "cpu") if timed else None
    with quiet():
        trainer = make_trainer(opts, accelerator, devices, strategy, [cb] if cb else [])
        return _fit(opts, trainer, cb)


def fit_worker(opts: Options, accelerator: str = "cpu", timed: bool = True) -> dict:
    """Worker for `launch`/torchrun: one rank of a Lightning DDP fit.

    The launcher has set RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    and initialised torch.distributed: LOCAL_RANK makes Lightning's
    LightningEnvironment report `creates_processes_externally`, so it starts no
    process, and the already-initialised group is reused, not created again.
    """
    import torch.distributed as dist
    from .case2_timing import StepTimerCallback, timed_strategy
    from .runtime import world_size
    group_before = dist.distributed_c10d._get_default_group() if dist.is_initialized() else None
    dev = "cuda" if accelerator == "gpu" else "cpu"
    cb = StepTimerCallback(dev)
    strategy = timed_strategy(cb) if timed else _plain_strategy()
    with quiet():
        trainer = make_trainer(opts, accelerator, world_size(), strategy, [cb])
        env = trainer.strategy.cluster_environment
        out = _fit(opts, trainer, cb)
    out.update(external=env.creates_processes_externally,
               same_group=group_before is not None and dist.distributed_c10d._get_default_group() is group_before,
               children=_child_processes())
    return out


def _child_processes():
    """Processes this rank started (a Lightning launcher would show here), or None."""
    try:
        import psutil
    except ImportError:
        return None
    return len([p for p in psutil.Process().children(recursive=True)
                if "resource_tracker" not in " ".join(p.cmdline())])


def _plain_strategy():
    from pytorch_lightning.strategies import DDPStrategy
    return DDPStrategy()


# -- costs measured in one process ---------------------------------------------
def nvml_cost(repeats: int = 50) -> dict:
    """Seconds per call of the post's NVML block (init, query every GPU,
    shutdown), median over `repeats`; or the error where NVML is missing."""
    err = nvml_error()
    if err is not None:
        return {"error": err, "per_call": None}
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        nvml_utilisation()
        times.append(time.perf_counter() - t0)
    import statistics
    return {"error": None, "per_call": statistics.median(times), "times": times}
