"""Workers for tests/test_launch_errors.py (spawned children import this module by name)."""

import torch.distributed as dist


def each_rank_raises():
    """Every rank fails on its own, before any collective: no rank is collateral."""
    raise ValueError(f"rank {dist.get_rank()} has its own problem")


def echo(a, b=0, *, scale=1):
    return {"rank": dist.get_rank(), "value": (a + b) * scale}
