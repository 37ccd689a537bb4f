"""Case 2's model, data and loss, as posted: an MLP 10 -> 256 -> 256 -> 256 -> 1, a dataset that draws
`torch.randn` in `__getitem__`, MSE of (B,1,1) against (B,1), which broadcasts: the post's bug, shown
with PyTorch's own warning (`loss_fn` does not silence it) and what the model then learns
(`loss_shape_effect`). Defined in notebook 04_case2_lightning.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from ...course.toy import mlp as _mlp
from .options import Options

D_IN = 10


def mlp(width: int = 256, depth: int = 3) -> nn.Sequential:
    """10 -> width (x `depth` hidden layers) -> 1 with ReLU; (256, 3) is the post's.
    Defined in notebook 04_case2_lightning."""
    return _mlp(width, depth, d_in=D_IN)


def param_count(width: int = 256, depth: int = 3) -> int:
    """Parameters of `mlp(width, depth)`: 134,657 for the post's model. Defined in notebook 05_case2_where_time_goes."""
    return (D_IN + 1) * width + (depth - 1) * (width + 1) * width + width + 1


def grad_bytes(width: int = 256, depth: int = 3, elem: int = 4) -> int:
    """Bytes all-reduced per synchronised step (fp32 gradients). Defined in notebook 05_case2_where_time_goes."""
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
    """The posted `SimpleDataset`, or (`randn_in_getitem=False`) the same shapes made once as two tensors."""
    if opts.randn_in_getitem:
        return SimpleDataset(opts.size)
    g = torch.Generator().manual_seed(opts.seed)  # made once, as two tensors
    return TensorDataset(torch.randn(opts.size, 1, D_IN, generator=g), torch.randn(opts.size, 1, generator=g))


def loss_fn(pred, y, opts: Options):
    """MSE as posted: `pred` (B,1,1) against `y` (B,1) broadcasts to (B,B,1), every prediction regressed on
    every target of the batch, and PyTorch warns ("Using a target size ... different to the input size").
    `fix_loss_shape=True` squeezes `pred` to (B,1). Defined in notebook 04_case2_lightning."""
    if opts.fix_loss_shape:
        pred = pred.squeeze(-1)  # (B,1,1) -> (B,1), the target's shape
    return nn.functional.mse_loss(pred, y)


def loss_shape_effect(fix_loss_shape: bool, steps: int = 300, batch: int = 256, seed: int = 0) -> dict:
    """What the model learns with the posted loss shape or the fixed one, on a target it can learn
    (y = the sum of x's 10 features): the spread of its predictions over a fresh batch against the
    target's, and their correlation with the target. With the broadcast, each prediction is pulled to
    the batch's mean target: the spread collapses. Defined in notebook 04_case2_lightning."""
    import warnings
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model, opts = mlp(), Options(fix_loss_shape=fix_loss_shape)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # shown once in notebook 04; not 300 times here
        for _ in range(steps):
            x = torch.randn(batch, 1, D_IN, generator=g)
            loss = loss_fn(model(x), x.sum(-1), opts)
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        x = torch.randn(batch, 1, D_IN, generator=g)
        pred, y = model(x).reshape(-1), x.sum(-1).reshape(-1)
    corr = torch.corrcoef(torch.stack([pred, y]))[0, 1].item()
    return {"pred_std": pred.std().item(), "target_std": y.std().item(), "corr": corr}
