"""A Lightning script with strategy="ddp" on 2 CPU ranks (rank 0 is this process; Lightning re-runs the
script for rank 1): 4,096 samples, batch 64, 2 epochs, so 32 optimizer steps an epoch on each rank.
`--sync-dist`: the training loss logged with `sync_dist=True`, an all-reduce at every step."""

import sys

import torch
import pytorch_lightning as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class M(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))

    def training_step(self, batch, i):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("loss", loss, sync_dist=SYNC)
        return loss

    def validation_step(self, batch, i):
        x, y = batch
        self.log("val", nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


SYNC = "--sync-dist" in sys.argv

if __name__ == "__main__":
    data = TensorDataset(torch.randn(4096, 10), torch.randn(4096, 1))
    trainer = pl.Trainer(strategy="ddp", devices=2, accelerator="cpu", max_epochs=2, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(M(), DataLoader(data, batch_size=64), DataLoader(data, batch_size=256))
    print("done")
