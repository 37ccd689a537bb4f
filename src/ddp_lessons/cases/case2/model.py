"""Case 2's model, data and loss, as posted: an MLP 10 -> 256 -> 256 -> 256 -> 1,
a dataset that draws `torch.randn` in `__getitem__`, MSE. Sized for the
break-even predictor. Defined in notebook 04_case2_lightning.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from ...course.toy import mlp as _mlp
from .options import Options

D_IN = 10


def mlp(width: int = 256, depth: int = 3) -> nn.Sequential:
    """10 -> width (x `depth` hidden layers) -> 1 with ReLU; (256, 3) is the post's.
    Defined in notebook 05_case2_where_time_goes."""
    return _mlp(width, depth, d_in=D_IN)


def param_count(width: int = 256, depth: int = 3) -> int:
    """Parameters of `mlp(width, depth)`: 134,657 for the post's model. Defined in notebook 04_case2_lightning."""
    return (D_IN + 1) * width + (depth - 1) * (width + 1) * width + width + 1


def grad_bytes(width: int = 256, depth: int = 3, elem: int = 4) -> int:
    """Bytes all-reduced per synchronised step (fp32 gradients)."""
    return param_count(width, depth) * elem


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


def loss_fn(pred, y, opts: Options):
    if opts.fix_loss_shape:
        pred = pred.squeeze(-1)  # (B,1,1) -> (B,1), the target's shape
    with warnings.catch_warnings():  # "target size different to input size": the post's bug
        warnings.simplefilter("ignore", UserWarning)
        return nn.functional.mse_loss(pred, y)
