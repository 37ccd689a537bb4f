"""ddp-lessons: measure why a DDP run is slower on several GPUs than on one.

The package the course's notebooks import. Each module holds one idea:
`launch` (start workers from a notebook), `runtime` (what a worker asks about
its run, the same under torchrun), `timing` (per-step compute and all-reduce),
`records` (run records in data/runs), `plots`, `bench` (all-reduce over message
sizes), and one module per case.
"""

from ._worker import report_progress
from .errors import (CudaForkError, LaunchConfigError, LaunchError,
                     NotebookWorkerError, WorkerFailed, WorkerTimeout)
from .launch import launch
from .runtime import run

__version__ = "0.1.0"

__all__ = ["launch", "run", "report_progress", "LaunchError", "LaunchConfigError",
           "NotebookWorkerError", "CudaForkError", "WorkerFailed", "WorkerTimeout"]
