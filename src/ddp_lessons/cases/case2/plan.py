"""Case 2's options turned into one rank's objects: the posted LightningModule and DataModule
(`module_classes`), the Trainer (`make_trainer`, Lightning's defaults wherever the post kept them), an
offline stand-in for the post's WandbLogger (`memory_logger`) and `quiet`. Lightning is imported only
when one is built. Defined in notebook 04_case2_lightning.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings

import torch
from torch.utils.data import DataLoader

from . import nvml
from .model import loss_fn, make_dataset, mlp
from .options import Options

FLUSH_EVERY = 50  # Trainer(log_every_n_steps=...): Lightning's default, which the post did not change


def module_classes():
    """(SimpleModel, SimpleDataModule): the posted test's Lightning classes, every fix an option."""
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
    """An offline stand-in for the post's WandbLogger: each flush (`log_metrics`) kept in memory as a
    row, and the seconds spent in flushes (`flush_s`), so a fit counts and times them."""
    from pytorch_lightning.loggers import Logger

    class MemoryLogger(Logger):
        def __init__(self):
            super().__init__()
            self.rows, self.flush_s = [], 0.0

        name = property(lambda self: "memory")
        version = property(lambda self: 0)

        def log_metrics(self, metrics, step=None):
            t0 = time.perf_counter()
            self.rows.append((step, {k: float(v) for k, v in metrics.items()}))
            self.flush_s += time.perf_counter() - t0

        def log_hyperparams(self, params, *args, **kwargs):
            pass

    return MemoryLogger()


@contextlib.contextmanager
def quiet():
    """Silence Lightning's banners and hints, and warnings (the posted loss shape's among them: notebook
    04 shows it once) while a fit runs."""
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


def make_trainer(opts: Options, accelerator="cpu", devices=1, strategy="auto", callbacks=(), logger=None,
                 flush_every: int = FLUSH_EVERY):
    """The posted Trainer for `opts`: `max_epochs`, `accumulate_grad_batches`, validation every epoch
    over every sample, the logger flushed every `flush_every` steps (Lightning's default 50, which the
    post kept); no progress bar, summary or checkpoint (output and files the course does not time)."""
    import pytorch_lightning as pl
    return pl.Trainer(
        accelerator=accelerator, devices=devices, num_nodes=1, strategy=strategy,
        max_epochs=opts.epochs, accumulate_grad_batches=opts.accumulate,
        logger=logger if logger is not None else memory_logger(), callbacks=list(callbacks),
        limit_train_batches=opts.train_batches, limit_val_batches=opts.val_batches if opts.val_every else 0,
        check_val_every_n_epoch=opts.val_every or 1, num_sanity_val_steps=0, log_every_n_steps=flush_every,
        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
        deterministic=False)
