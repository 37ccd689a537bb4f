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
LAUNCHER_PID = "DDP_LESSONS_LAUNCHER_PID"  # set while `launch` starts its workers (and the fork server)

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
    # forkserver only: the launching process's environment now. A child forked
    # from the fork server gets sys.path, the working directory and the main
    # module as a spawned one does, but the server's environment, which is
    # that of the moment the server started.
    environ: dict | None = None
    parent_pid: int | None = None   # the launching process


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
        _conn.send(msg)  # type: ignore[union-attr] # callers check it is set
    except (OSError, ValueError):
        pass  # the parent is gone or tearing down; nothing to tell


def _die_with_parent() -> None:
    # When the process that started us dies (the launching kernel, or the fork
    # server, which exits with it), the kernel sends us SIGKILL (Linux only).
    if sys.platform.startswith("linux"):
        parent = os.getppid()
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
        except OSError:
            return
        if os.getppid() != parent:  # it died before the request took effect
            os._exit(1)


def _started_by_launch() -> bool:
    # multiprocessing names the process before it unpickles the worker (and
    # so before it imports the worker's module, which may take long): arming
    # the death signal here covers a parent that dies while a worker starts.
    import multiprocessing
    return multiprocessing.current_process().name.startswith("ddp_lessons-rank")


def _alive(pid: int) -> bool:
    """Is process `pid` running? A zombie (exited, not yet reaped by its own parent) is not."""
    import psutil
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True  # cannot tell: keep running


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
    kwargs: dict = {}
    if spec.backend == "nccl":
        torch.cuda.set_device(rank)
        kwargs["device_id"] = torch.device("cuda", rank)
    dist.init_process_group(spec.backend, store=store, rank=rank,
                            world_size=spec.world_size, timeout=timeout, **kwargs)


def _error_record(exc: BaseException) -> dict:
    return {"time": time.time(), "type": type(exc).__name__, "message": str(exc),
            "traceback": "".join(traceback.format_exception(exc))}


def _fail(spec: WorkerSpec, rank: int, exc: BaseException) -> None:
    write_atomic(os.path.join(spec.run_dir, ERROR.format(rank)), pickle.dumps(_error_record(exc)))
    _send(("error",))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)  # skip interpreter teardown: gloo threads may still be blocked


def child_main(rank: int, spec: WorkerSpec) -> None:
    """Entry point of every launched worker process."""
    global _conn
    _die_with_parent()
    if spec.parent_pid is not None and not _alive(spec.parent_pid):
        os._exit(1)  # the launching process died while this one was starting: nothing to run for
    _conn = spec.conns[rank]
    if spec.environ is not None:
        os.environ.clear()
        os.environ.update(spec.environ)
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
        _fail(spec, rank, exc)
    _send(("done",))
    # Wait until every rank is done: leaving now would close this rank's
    # connections under a peer still inside a collective.
    spec.release.wait()
    import torch.distributed as dist
    dist.destroy_process_group()


def _watch_launcher(pid: int) -> None:
    # A worker forked by the fork server is the server's child, and the server
    # outlives the launching process while any of its children live (each child
    # holds its "alive" pipe open): the death signal above never comes. So every
    # worker also watches the launching process itself.
    while True:
        time.sleep(0.5)
        if not _alive(pid):
            os._exit(1)


if _started_by_launch():
    _die_with_parent()
    if os.environ.get(LAUNCHER_PID, "").isdigit():
        import threading
        threading.Thread(target=_watch_launcher, args=(int(os.environ[LAUNCHER_PID]),), daemon=True,
                         name="ddp_lessons-watch-launcher").start()
