"""What runs inside each worker process that `launch` starts.

The parent hands every child one `WorkerSpec`. The child sets the standard
environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), pins its
CPU threads, joins the process group through a FileStore (no socket), runs the
worker, and leaves its return value or its error in a file of the run's
private directory. Messages to the parent (progress, done, error) go through
a one-way pipe; payloads go through files, because a pipe or queue that holds
more than ~64 KB deadlocks a parent that joins before it reads.
"""

from __future__ import annotations

import ctypes
import dataclasses
import datetime
import os
import pickle
import signal
import sys
import time
import traceback
from typing import Any, Callable

RESULT = "rank{}.result"
ERROR = "rank{}.error"
LOG = "rank{}.log"
STORE = "store"

_conn = None            # this worker's pipe to the parent; None under torchrun
_last_progress = 0.0


@dataclasses.dataclass
class WorkerSpec:
    fn: Callable
    args: tuple
    kwargs: dict
    world_size: int
    backend: str
    run_dir: str
    master_port: int
    threads: int
    collective_timeout_s: float
    capture_output: bool
    start_method: str
    release: Any          # multiprocessing Event: set by the parent once every rank is done
    conns: list           # one pipe end per rank


def write_atomic(path: str, data: bytes) -> None:
    """Write then rename, so the parent never reads half a file."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def report_progress(step: int, total: int | None = None) -> None:
    """Tell the launching notebook that this rank finished `step` of `total`.

    Cheap enough for every step: it sends at most five messages a second.
    Does nothing under torchrun or outside a launch.
    Defined in notebook 00_first_launch.
    """
    global _last_progress
    if _conn is None:
        return
    now = time.monotonic()
    if now - _last_progress < 0.2 and step != total:
        return
    _last_progress = now
    _send(("progress", step, total))


def _send(msg) -> None:
    try:
        _conn.send(msg)
    except (OSError, ValueError):
        pass  # the parent is gone or tearing down; nothing to tell


def _die_with_parent() -> None:
    # If the notebook kernel dies, the kernel sends SIGKILL to us (Linux only).
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
        except OSError:
            pass


def loopback_name() -> str | None:
    names = {name for _, name in socket_if_names()}
    return next((n for n in ("lo", "lo0") if n in names), None)


def socket_if_names():
    import socket
    try:
        return socket.if_nameindex()
    except OSError:
        return []


def _set_env(spec: WorkerSpec, rank: int) -> None:
    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(spec.world_size),
        LOCAL_WORLD_SIZE=str(spec.world_size), GROUP_RANK="0",
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(spec.master_port),
        OMP_NUM_THREADS=str(spec.threads), DDP_LESSONS_START_METHOD=spec.start_method)
    lo = loopback_name()
    if lo:
        # Keep every socket of a one-machine run on loopback: gloo's pairs, and
        # NCCL's bootstrap and proxy listeners (NCCL otherwise binds the first
        # non-loopback interface it finds, reachable from the network).
        os.environ.setdefault("GLOO_SOCKET_IFNAME", lo)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", lo)


def _capture_output(spec: WorkerSpec, rank: int) -> None:
    # Only the parent prints: a worker's output goes to its log file, which
    # the parent quotes when the worker fails.
    fd = os.open(os.path.join(spec.run_dir, LOG.format(rank)),
                 os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _init_process_group(spec: WorkerSpec, rank: int) -> None:
    import torch
    import torch.distributed as dist
    store = dist.FileStore(os.path.join(spec.run_dir, STORE), spec.world_size)
    timeout = datetime.timedelta(seconds=spec.collective_timeout_s)
    kwargs = {}
    if spec.backend == "nccl":
        torch.cuda.set_device(rank)
        kwargs["device_id"] = torch.device("cuda", rank)
    dist.init_process_group(spec.backend, store=store, rank=rank,
                            world_size=spec.world_size, timeout=timeout, **kwargs)


def _error_record(exc: BaseException) -> dict:
    return {"time": time.time(), "type": type(exc).__name__, "message": str(exc),
            "traceback": "".join(traceback.format_exception(exc))}


def child_main(rank: int, spec: WorkerSpec) -> None:
    """Entry point of every launched worker process."""
    global _conn
    _die_with_parent()
    _conn = spec.conns[rank]
    _send(("started",))  # past unpickling: a rank that dies before this never ran the worker
    _set_env(spec, rank)
    if spec.capture_output:
        _capture_output(spec, rank)
    import torch
    # Before any compute: a forked child of a parent that ran OpenMP work
    # deadlocks in its first multi-threaded op, and ranks that share cores
    # must not each start one thread per core.
    torch.set_num_threads(spec.threads)
    try:
        _init_process_group(spec, rank)
        result = spec.fn(*spec.args, **spec.kwargs)
        write_atomic(os.path.join(spec.run_dir, RESULT.format(rank)),
                     pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    except BaseException as exc:  # noqa: BLE001 - the parent reports it
        write_atomic(os.path.join(spec.run_dir, ERROR.format(rank)),
                     pickle.dumps(_error_record(exc)))
        _send(("error",))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # skip interpreter teardown: gloo threads may still be blocked
    _send(("done",))
    # Wait until every rank is done: leaving now would close this rank's
    # connections under a peer still inside a collective.
    spec.release.wait()
    import torch.distributed as dist
    dist.destroy_process_group()
