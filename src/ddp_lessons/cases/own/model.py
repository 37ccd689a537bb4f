"""The workload's model: a ResNet-18-like CNN at half width for CIFAR-shaped
images (3 x 32 x 32, 10 classes).

ResNet-18's layout (a stem, four stages of two basic blocks, global pooling,
a linear head) with half its channels (32, 64, 128, 256 instead of 64 ... 512)
and a stride-2 stem, so that a step of batch 32 takes tens of milliseconds on
one CPU core: small enough for a notebook on two cores. `width` scales every
stage (32 = half width). `with_unused_branch=True` adds an auxiliary head that
`forward` never calls: the model DDP refuses without
`find_unused_parameters=True`. Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a shortcut (1x1 when the shape changes)."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class SmallResNet(nn.Module):
    """ResNet-18's layout at `width` channels in its first stage (64 in ResNet-18).
    Defined in notebook 07_diagnose_your_own_run."""

    def __init__(self, num_classes: int = 10, width: int = 32, with_unused_branch: bool = False):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        chans = [width, 2 * width, 4 * width, 8 * width]
        layers, c_in = [], width
        for i, c in enumerate(chans):
            layers += [BasicBlock(c_in, c, 1 if i == 0 else 2), BasicBlock(c, c)]
            c_in = c
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, num_classes)
        # A head left over from another task: it has parameters, forward never uses it.
        self.aux_head = nn.Linear(c_in, num_classes) if with_unused_branch else None

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def parameter_count(model: nn.Module) -> int:
    """Defined in notebook 07_diagnose_your_own_run."""
    return sum(p.numel() for p in model.parameters())
