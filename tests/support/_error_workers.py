"""Workers for tests/tool/test_launch_errors.py (spawned children import this module by name)."""

import torch.distributed as dist


def each_rank_raises():
    """Every rank fails on its own, after a barrier: no rank is collateral. (Without
    the barrier, a loaded machine can have rank 0 exit while rank 1 is still
    connecting its process group, and rank 1 then truly fails as collateral.)"""
    dist.barrier()
    raise ValueError(f"rank {dist.get_rank()} has its own problem")


def echo(a, b=0, *, scale=1):
    return {"rank": dist.get_rank(), "value": (a + b) * scale}


def chatty():
    """Prints to stdout and stderr, then returns its rank."""
    import sys
    rank = dist.get_rank()
    print(f"rank {rank} says hello")
    print(f"rank {rank} warns", file=sys.stderr)
    return rank
