"""ddp-lessons: measure why a DDP run is slower on several GPUs than on one.

The package the course's notebooks import, read from the ground floor up:

- ground floor: `launcher` (start workers from a notebook or under torchrun),
  `runtime` (what a worker asks about its run), `timing` (a timer that only
  measures), `hooks` (communication hooks that change what DDP sends),
  `allreduce` (all-reduce over message sizes and its one cost model),
  `records` (run records), `spread` (statistics of repeated runs), `plots`,
  `exercises`, `common`, `cmdline`;
- `intro` (notebook 00's workers), `case1` (notebooks 01-03), `case2` (04-06),
  `own` (notebook 07: a learner's own run, and the standard tools on it);
- `cli`: `python -m ddp_lessons COMMAND`.

Arrows point down: a case imports the ground floor, never the other way.

The public API is below: `place` says where a lesson's ranks run on this
machine (NCCL with one GPU each, or gloo on the CPU), `launch` and `run`
start workers, `report_progress` feeds the notebook's progress line, and
the errors say what went wrong.
"""

from .launcher import (CudaForkError, LaunchConfigError, LaunchError, NotebookWorkerError, Placement,
                       WorkerFailed, WorkerTimeout, launch, place, report_progress, run)

__version__ = "0.1.0"

__all__ = ["launch", "run", "place", "Placement", "report_progress", "LaunchError", "LaunchConfigError",
           "NotebookWorkerError", "CudaForkError", "WorkerFailed", "WorkerTimeout"]
