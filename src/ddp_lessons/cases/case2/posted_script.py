"""The posted script's shape, for timing what Lightning's `strategy='ddp'` launch costs (notebook 04,
benchmarks/lightning_launch.py): import Lightning, build the data, the model and a logger, then
`Trainer(strategy=..., devices=N).fit`, with Lightning's defaults otherwise (progress bar,
checkpoint). Lightning re-runs this whole file for ranks 1..N-1; every rank writes its wall-clock
stamps to `--stamps`. It imports nothing from ddp_lessons, as the post's script did not; its
WandbLogger is a CSVLogger here (wandb is not installed; nothing is sent anywhere).
"""

import time

T_FIRST_LINE = time.time()  # the script's first line: before any import

import argparse  # noqa: E402 - after the first stamp, on purpose
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import pytorch_lightning as pl  # noqa: E402
import torch  # noqa: E402
from pytorch_lightning.loggers import CSVLogger  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

try:
    import pynvml  # the post's per-step GPU query
except ImportError:  # no nvidia-ml-py: the query is off
    pynvml = None

T_IMPORTED = time.time()
STAMPS = {"first_line": T_FIRST_LINE, "imported": T_IMPORTED}


class SimpleDataset(Dataset):
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, idx):
        return torch.randn(1, 10), torch.randn(1)


class SimpleDataModule(pl.LightningDataModule):
    def __init__(self, batch_size, size):
        super().__init__()
        self.batch_size, self.size = batch_size, size

    def setup(self, stage=None):
        self.dataset = SimpleDataset(self.size)

    def train_dataloader(self):
        return DataLoader(self.dataset, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.dataset, batch_size=self.batch_size)


class SimpleModel(pl.LightningModule):
    def __init__(self, nvml: bool):
        super().__init__()
        self.nvml = nvml and pynvml is not None
        self.fc1, self.fc2, self.fc3, self.fc4 = (nn.Linear(10, 256), nn.Linear(256, 256), nn.Linear(256, 256),
                                                  nn.Linear(256, 1))

    def forward(self, x):
        return self.fc4(torch.relu(self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.MSELoss()(self(x), y)  # as posted: (B,1,1) against (B,1) (notebook 04 names the bug)
        self.log("train_loss", loss)
        if self.nvml:
            pynvml.nvmlInit()
            util = [pynvml.nvmlDeviceGetUtilizationRates(pynvml.nvmlDeviceGetHandleByIndex(i)).gpu
                    for i in range(pynvml.nvmlDeviceGetCount())]
            pynvml.nvmlShutdown()
            for i, u in enumerate(util):
                self.log(f"gpu_{i}_utilization", float(u))
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.MSELoss()(self(x), y)
        self.log("val_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.01)


class Stamps(pl.Callback):
    """Wall-clock stamps of the fit's stages, and the processes rank 0 started."""

    def on_fit_start(self, trainer, pl_module):
        STAMPS["fit_start"] = time.time()

    def on_train_start(self, trainer, pl_module):
        STAMPS["train_start"] = time.time()
        STAMPS["children"] = _children()

    def on_train_end(self, trainer, pl_module):
        STAMPS["train_end"] = time.time()


def _children():
    try:
        import psutil
        return [" ".join(p.cmdline()[1:])[-160:] for p in psutil.Process().children()]
    except Exception:  # noqa: BLE001 - psutil missing, or a child gone: nothing to list
        return None


def _created():
    try:
        import psutil
        return psutil.Process().create_time()
    except Exception:  # noqa: BLE001 - psutil missing
        return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--devices", type=int, default=3)
    p.add_argument("--strategy", default="ddp")
    p.add_argument("--accelerator", default="cpu")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--nvml", action="store_true", help="the post's NVML block in every training_step")
    p.add_argument("--stamps", required=True, help="a folder: each rank writes rank<N>.json there")
    p.add_argument("--logs", required=True, help="the logger's and the checkpoints' folder")
    args = p.parse_args()
    warnings.filterwarnings("ignore")  # the posted loss shape's warning, Lightning's hints: not timed here
    data_module = SimpleDataModule(batch_size=256, size=5000)
    model = SimpleModel(args.nvml)
    logger = CSVLogger(args.logs, name="simple_model")
    trainer = pl.Trainer(accelerator=args.accelerator, strategy=args.strategy, devices=args.devices,
                         max_epochs=args.epochs, accumulate_grad_batches=3, logger=logger,
                         default_root_dir=args.logs, callbacks=[Stamps()])
    STAMPS["built"] = time.time()
    trainer.fit(model, data_module)
    STAMPS.update(fit_end=time.time(), rank=trainer.global_rank, world_size=trainer.world_size,
                  pid=os.getpid(), ppid=os.getppid(), created=_created(),
                  launcher=type(getattr(trainer.strategy, "_launcher", None)).__name__,
                  local_rank_env=os.environ.get("LOCAL_RANK"), argv=sys.argv)
    with open(os.path.join(args.stamps, f"rank{trainer.global_rank}.json"), "w") as f:
        json.dump(STAMPS, f)


if __name__ == "__main__":
    main()
