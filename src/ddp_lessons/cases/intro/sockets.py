"""Worker: which sockets a rank listens on while its process group is up.

The launcher keeps a one-machine run on loopback (a FileStore rendezvous,
GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME set to `lo`); this worker checks
it, on gloo (tests/tool/test_launch.py) and on NCCL (benchmarks/nccl_loopback.py).
Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from ...tool import runtime


def listening_sockets() -> dict:
    """After one all-reduce (communicators up), this rank's listening TCP
    sockets and bound UDP sockets, as (address, port)."""
    import psutil
    t = torch.ones(1, device=runtime.device())
    dist.all_reduce(t)  # on NCCL: the communicator and its bootstrap/proxy threads exist now
    dist.barrier()
    me = psutil.Process()
    tcp = sorted({(c.laddr.ip, c.laddr.port) for c in me.net_connections(kind="tcp")
                  if c.status == psutil.CONN_LISTEN})
    udp = sorted({(c.laddr.ip, c.laddr.port) for c in me.net_connections(kind="udp")})
    dist.barrier()  # every rank looked while every communicator was up
    return {"rank": dist.get_rank(), "backend": dist.get_backend(), "listen_tcp": tcp, "udp": udp,
            "env": {k: os.environ.get(k) for k in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")}}


def beyond_loopback(addresses) -> list:
    """The addresses that are not loopback (127.0.0.0/8, ::1)."""
    return [(ip, port) for ip, port in addresses if not (ip.startswith("127.") or ip == "::1")]
