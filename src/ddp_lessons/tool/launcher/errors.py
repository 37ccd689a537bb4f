"""The errors the launcher raises, one class per thing a learner can get wrong.

Each message's first line says what happened and what to do; a worker's
traceback, when there is one, follows on the next lines.
Defined in notebook 00_first_launch.
"""


class LaunchError(RuntimeError):
    """Base class: something stopped a `launch` before or while it ran."""

    @property
    def summary(self) -> str:
        """The first line of the message (what happened, what to do)."""
        return str(self).splitlines()[0] if str(self) else type(self).__name__


class LaunchConfigError(LaunchError, ValueError):
    """Refused before any process started (bad world size, no GPUs, bad backend)."""


class NotebookWorkerError(LaunchError):
    """The worker function cannot reach processes started by forkserver or spawn
    (defined in a cell, nested, a lambda)."""


class CudaForkError(LaunchError):
    """`start_method='fork'` asked for after CUDA was initialised in this process."""


class WorkerFailed(LaunchError):
    """A worker raised or died. `rank` is the rank that failed first (the root cause);
    `collateral` the other ranks that failed; `reports` every failed rank's
    report (time, type, message, traceback)."""

    def __init__(self, message: str, rank: int, worker_traceback: str = "",
                 collateral: tuple = (), reports: dict | None = None):
        super().__init__(message)
        self.rank = rank
        self.worker_traceback = worker_traceback
        self.collateral = tuple(collateral)
        self.reports = dict(reports or {})


class WorkerTimeout(LaunchError):
    """The run passed its deadline; `unfinished` lists the ranks that never returned."""

    def __init__(self, message: str, unfinished: tuple, finished: tuple):
        super().__init__(message)
        self.unfinished = tuple(unfinished)
        self.finished = tuple(finished)
