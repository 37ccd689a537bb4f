"""The course's toy model: a small MLP that notebook 00, case 2 and the tests train.

Defined in notebook 00_first_launch.
"""

from __future__ import annotations

from torch import nn


def mlp(width: int = 256, depth: int = 4, d_in: int = 32) -> nn.Sequential:
    """d_in -> width (x `depth` hidden layers, ReLU) -> 1. Defined in notebook 00_first_launch."""
    layers, d = [], d_in
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.ReLU()]
        d = width
    return nn.Sequential(*layers, nn.Linear(d, 1))
