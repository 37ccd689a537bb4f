"""Workers for tests/tool/test_launch.py (spawned children import this module by name)."""

import os
import time

import psutil
import torch
import torch.distributed as dist


def big_result(nbytes):
    return torch.zeros(nbytes // 4)


def listening_sockets():
    """This worker's listening TCP sockets, while the group is up."""
    dist.barrier()
    me = psutil.Process()
    out = [(c.laddr.ip, c.laddr.port) for c in me.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
    dist.barrier()
    return out


def sleep_forever():
    while True:
        time.sleep(0.1)


def stuck_in_collective():
    if dist.get_rank() == 0:
        t = torch.ones(1)
        dist.all_reduce(t)  # rank 1 never joins
    time.sleep(600)


def print_something():
    print("worker output that must not reach the caller")
    return os.getpid()


def loader_with_workers():
    """A DataLoader with worker processes inside a launched worker."""
    from torch.utils.data import DataLoader
    return sum(int(b.sum()) for b in DataLoader(list(range(8)), batch_size=4, num_workers=2))
