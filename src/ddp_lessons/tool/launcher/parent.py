"""`launch(fn, args, world_size)`: run a worker on N processes, get N return values.

The notebook-friendly counterpart of `torchrun`: the same worker function runs under both (see
`ddp_lessons.tool.runtime.run`). Defined in notebook 00_first_launch. What it guarantees, each checked
by tests/tool/test_launch.py: bad input is refused before any process starts (world size, GPUs, a worker
defined in a notebook cell under forkserver or spawn, CUDA initialised before fork); the rendezvous goes
through a FileStore in a private temporary directory (no socket is opened for it, and gloo is kept on
the loopback interface); a failing run raises within seconds, naming the rank that failed first; no
process, port or temporary file outlives the call, whatever happens.
"""

from __future__ import annotations

import os
import pickle
import time
from multiprocessing.connection import wait as wait_any

from ..runtime import cpu_count, threads_per_rank
from . import child as _worker
from . import cleanup, reports
from .checks import (check_fork, check_spawnable, check_start_method, check_timeout, check_world_size,
                     default_start_method)
from .placement import place
from .progress import make_progress
from .results import Results

GRACE_S = 1.0        # after a first failure, how long peers get to report theirs
STARTUP_S = 120.0    # default allowance for every rank to start (3-22 s seen on a loaded 2-core machine)
TERMINATE_S = 2.0    # SIGTERM, then SIGKILL after this long
LOG_KEEP = 1 << 20    # bytes of each rank's output kept after a successful run (its end)
DEFAULT_COLLECTIVE_S = 1800.0  # torch's default collective timeout on gloo


# What the fork server imports once, so that each worker forked from it starts
# in a fraction of a second instead of importing torch again (about 3 s of CPU
# per rank on a laptop-class core) and torch._dynamo, which DDP's constructor
# imports (1.8 s more). Nothing of ddp_lessons: a worker forked from it imports
# the helper as it is now, so an edit reaches the next launch.
FORKSERVER_PRELOAD = ("torch", "torch.distributed", "torch._dynamo")


def launch(fn, args=(), kwargs=None, world_size: int = 2, backend: str | None = None,
           timeout: float | None = 300.0, start_method: str | None = None,
           threads: int | None = None, capture_output: bool = True,
           progress="auto", startup_timeout: float = STARTUP_S):
    """Run `fn(*args, **kwargs)` on `world_size` processes with torch.distributed initialised.

    Returns the list of every rank's return value, in rank order (a `Results`,
    a list whose `.logs[rank]` is the rank's captured stdout and stderr: the
    last LOG_KEEP bytes of each, or {} with `capture_output=False`).
    `backend`: None picks NCCL (one GPU per rank) when at least `world_size`
    GPUs are visible, else gloo on the CPU: the rule of `place(world_size)`.
    `timeout`: seconds for the run once every rank has started; past it the
    run is stopped and `WorkerTimeout` names the ranks that did not finish
    (None: no deadline; a collective then still gives up after torch's
    default: 30 minutes on gloo, 10 on NCCL). `startup_timeout`: seconds for every rank to
    start, counted apart (a loaded machine starts processes slowly); past
    it `WorkerTimeout` names the ranks that never started.
    `start_method`: None picks "forkserver" where the platform has it, else
    "spawn" (`checks.default_start_method`); "fork" runs a worker defined in a
    notebook cell, but only while CUDA is untouched in this process.
    `threads`: torch threads per worker (default: the cores divided among workers).
    `capture_output`: workers' prints go to a log (quoted on failure), not the cell.
    `progress`: "auto" shows per-rank steps in a notebook when a run lasts over
    2 s; a callable gets `(rank, step, total)`; None shows nothing.
    Defined in notebook 00_first_launch.
    """
    check_world_size(world_size)
    check_timeout(timeout)
    check_timeout(startup_timeout, "startup_timeout")
    start_method = start_method or default_start_method()
    check_start_method(start_method)
    check_fork(start_method)
    backend = place(world_size, backend, start_method).backend
    kwargs = dict(kwargs or {})
    check_spawnable(fn, (args, kwargs), start_method)
    threads = threads or threads_per_rank(cpu_count(), world_size)
    cleanup.sweep()  # what a launching process killed by SIGKILL left
    with cleanup.terminate_raises():
        run = _Run(fn, args, kwargs, world_size, backend, timeout, start_method, threads,
                   capture_output, make_progress(progress, world_size), startup_timeout)
        try:
            run.start()
            return run.wait()
        finally:
            run.close()


class _Run:
    """One launch: the processes, their pipes, the private directory, the port."""

    def __init__(self, fn, args, kwargs, world_size, backend, timeout, start_method,
                 threads, capture_output, progress, startup_timeout=STARTUP_S):
        import torch.multiprocessing as tmp
        self.ctx = tmp.get_context(start_method)
        self.world_size = world_size
        self.timeout = float("inf") if timeout is None else float(timeout)
        self.startup_timeout = float(startup_timeout)
        self.procs, self.readers, self.port_sock, self.progress = [], [], None, progress
        self.run_dir = cleanup.run_directory()
        try:
            self._prepare(fn, args, kwargs, backend, start_method, threads, capture_output)
        except BaseException:  # an interrupt here: `launch` has no run to close yet
            self.close()
            raise
        self.started, self.done, self.failed = set(), set(), {}   # failed: rank -> observed time

    def _prepare(self, fn, args, kwargs, backend, start_method, threads, capture_output):
        world_size = self.world_size
        self.port_sock = cleanup.reserve_port()
        pipes = [self.ctx.Pipe(duplex=False) for _ in range(world_size)]
        self.readers = [r for r, _ in pipes]
        environ = None
        if start_method == "forkserver":
            self.ctx.set_forkserver_preload(list(FORKSERVER_PRELOAD))  # read when the server starts
            environ = dict(os.environ)
        self.spec = _worker.WorkerSpec(
            environ=environ,
            fn=fn, args=tuple(args), kwargs=kwargs, world_size=world_size, backend=backend,
            run_dir=self.run_dir, master_port=self.port_sock.getsockname()[1],
            threads=threads, collective_timeout_s=_collective_timeout(self.timeout),
            capture_output=capture_output, start_method=start_method, release=self.ctx.Event(),
            conns=[w for _, w in pipes], parent_pid=os.getpid())

    def start(self):
        # Seen by spawned workers and by the fork server (whose environment its
        # children get), so every worker can tell when this process is gone.
        before = os.environ.get(_worker.LAUNCHER_PID)
        os.environ[_worker.LAUNCHER_PID] = str(os.getpid())
        try:
            self._start_all()
        finally:
            if before is None:
                os.environ.pop(_worker.LAUNCHER_PID, None)
            else:
                os.environ[_worker.LAUNCHER_PID] = before

    def _start_all(self):
        for rank in range(self.world_size):
            # Not daemonic: a daemon may not start children, and a worker's
            # DataLoader needs to. `close` and PR_SET_PDEATHSIG end them instead.
            p = self.ctx.Process(target=_worker.child_main, args=(rank, self.spec),
                                 name=f"ddp_lessons-rank{rank}", daemon=False)
            # Held before it starts: an interrupt that lands inside start()
            # (the fork server may still be importing torch) must not leave a
            # child that `close` cannot stop and that the interpreter's exit
            # would then wait for.
            self.procs.append(p)
            p.start()
        for w in self.spec.conns:
            w.close()  # the children hold the write ends now
        self.start_time = time.monotonic()

    # -- the wait loop -------------------------------------------------------
    def wait(self):
        deadline = self.start_time + self.startup_timeout  # until every rank has started
        all_started = False
        while len(self.done) < self.world_size and not self.failed:
            if not all_started and len(self.started) == self.world_size:
                all_started, deadline = True, time.monotonic() + self.timeout
            if time.monotonic() > deadline:
                self._raise_timeout(all_started)
            self._poll(min(0.1, max(0.0, deadline - time.monotonic())))
        if self.failed:
            self._collect_failures()
            self._raise_failure()
        self.spec.release.set()
        self._join_all(10.0)
        logs = {r: self._log_tail(r, None) for r in range(self.world_size)} if self.spec.capture_output else {}
        return Results((self._read(_worker.RESULT.format(r)) for r in range(self.world_size)), logs)

    def _poll(self, timeout):
        readers = [r for r in self.readers if not r.closed]
        alive = {p.sentinel: i for i, p in enumerate(self.procs) if i not in self.failed}
        for obj in wait_any(readers + list(alive), timeout=timeout):
            now = time.time()
            if obj in alive:
                rank = alive[obj]
                # The sentinel is ready once the process has closed its files,
                # a moment before it can be reaped: wait for its exit code.
                self.procs[rank].join(TERMINATE_S)
                code = self.procs[rank].exitcode
                if code not in (0, None) or rank not in self.done:
                    self._drain(self.readers[rank])
                    if rank not in self.done:
                        self.failed.setdefault(rank, now)
            else:
                self._drain(obj)

    def _drain(self, reader):
        rank = self.readers.index(reader)
        try:
            while not reader.closed and reader.poll():
                msg = reader.recv()
                if msg[0] == "progress" and self.progress:
                    self.progress(rank, msg[1], msg[2])
                elif msg[0] == "started":
                    self.started.add(rank)
                elif msg[0] == "done":
                    self.done.add(rank)
                elif msg[0] == "error":
                    self.failed.setdefault(rank, time.time())
        except (EOFError, OSError):
            reader.close()

    # -- failure reports -----------------------------------------------------
    def _collect_failures(self):
        # Peers of a failed rank fail a moment later in their collectives:
        # give them a moment, so the root cause can be told from the collateral.
        end = time.monotonic() + GRACE_S
        while time.monotonic() < end and len(self.failed) + len(self.done) < self.world_size:
            self._poll(0.05)

    def _failure(self, rank):
        path = os.path.join(self.run_dir, _worker.ERROR.format(rank))
        if os.path.exists(path):
            with open(path, "rb") as f:
                return pickle.load(f)
        code = self.procs[rank].exitcode
        if code is not None and code < 0:
            how = f"was killed by signal {-code}"
        elif rank not in self.started:
            # Spawned children import the launching script as __main__; one
            # without the guard starts a launch of its own there, and dies.
            how = (f"exited with code {code} before the worker started: if you launch from a script, "
                   "put the launch under `if __name__ == \"__main__\":` (workers re-import "
                   "the script); the worker's own output is above, on this process's stderr")
        else:
            how = f"exited with code {code} without raising"
        return {"time": self.failed[rank], "type": None, "message": how,
                "traceback": self._log_tail(rank)}

    def _raise_failure(self):
        raise reports.failure({r: self._failure(r) for r in self.failed}, self.started)

    def _raise_timeout(self, all_started=True):
        raise reports.timeout(self.world_size, self.started, self.done, all_started,
                              self.timeout, self.startup_timeout)

    def _log_tail(self, rank, lines=20):
        return reports.log_tail(os.path.join(self.run_dir, _worker.LOG.format(rank)), lines, LOG_KEEP)

    def _read(self, name):
        with open(os.path.join(self.run_dir, name), "rb") as f:
            return pickle.load(f)

    # -- teardown ------------------------------------------------------------
    def _join_all(self, timeout):
        end = time.monotonic() + timeout
        for p in self._begun():
            p.join(max(0.0, end - time.monotonic()))

    def _begun(self):
        # `procs` holds a process before its start() returns (see _start_all)
        return [p for p in self.procs if p.pid is not None]

    def close(self):
        """Stop every worker still running, then remove the directory and port."""
        for p in self._begun():
            if p.is_alive():
                p.terminate()  # a rank blocked in a C++ collective ignores SIGINT
        self._join_all(TERMINATE_S)
        for p in self._begun():
            if p.is_alive():
                p.kill()
                p.join()
        for r in self.readers:
            r.close()
        if self.progress:
            self.progress.close()
        if self.port_sock is not None:
            self.port_sock.close()
        cleanup.remove(self.run_dir)


def _collective_timeout(run_timeout: float) -> float:
    # A little past the run's deadline, so the launcher reports the hang, not
    # a worker; torch's own default (30 min) when the run has none.
    return run_timeout + 30.0 if run_timeout < DEFAULT_COLLECTIVE_S else DEFAULT_COLLECTIVE_S
