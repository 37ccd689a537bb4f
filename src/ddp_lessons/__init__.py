"""ddp-lessons: measure why a DDP run is slower on several GPUs than on one.

The package the course's notebooks import, read from the ground floor up:

- ground floor: `launcher` (start workers from a notebook or under torchrun),
  `runtime` (what a worker asks about its run), `timing` (a timer that only
  measures), `hooks` (communication hooks that change what DDP sends),
  `allreduce` (all-reduce over message sizes and its one cost model),
  `records` (run records), `spread` (statistics of repeated runs), `verdict`
  (a claim decided by the numbers), `diagnosis` (what cost a run its time;
  runs side by side), `predict` (`whatif`: a recorded run's step on N ranks
  over a given link, a model), `plots`, `exercises`, `common`, `cmdline`;
- `intro` (notebook 00's workers), `case1` (notebooks 01-03), `case2` (04-06),
  `own` (notebook 07: a learner's own run, and the standard tools on it);
- `cli`: `python -m ddp_lessons COMMAND`.

Arrows point down: a case imports the ground floor, never the other way.

The public API is below: `place` says where a lesson's ranks run on this
machine (NCCL with one GPU each, or gloo on the CPU), `launch` and `run`
start workers (they return a `Results`: the ranks' values in rank order, with
each rank's captured output in `.logs`), `report_progress` feeds the
notebook's progress line, and the errors say what went wrong.
`StepTimer` times every step of a worker and accounts for the rest of its
time (work outside the steps, the remainder); `diagnose(results)` ranks what
cost a run its time, each cause with what to change and how to check;
`compare({name: repeats, ...}, baseline=name)` puts runs side by side with the
spread of their repeats and a verdict per run (`ddp_lessons.verdict`);
`whatif(run, link, world_size)` replays a timed run's buckets through a link
and predicts its step on N ranks (a model that prints its assumptions).

    from ddp_lessons import StepTimer, compare, diagnose, launch
    results = launch(my_workers.train, kwargs={"epochs": 2}, world_size=2)  # each returns timer.result()
    print(diagnose(results))
    print(compare({"1 rank": [launch(my_workers.train, world_size=1) for _ in range(3)],
                   "2 ranks": [launch(my_workers.train, world_size=2) for _ in range(3)]}))
"""

from .diagnosis import Comparison, Diagnosis, Finding, compare, diagnose
from .predict import whatif
from .launcher import (CudaForkError, LaunchConfigError, LaunchError, NotebookWorkerError, Placement,
                       Results, WorkerFailed, WorkerTimeout, launch, place, report_progress, run)
from .timing import StepTimer

__version__ = "0.1.0"

__all__ = ["launch", "run", "place", "Placement", "Results", "report_progress", "StepTimer", "diagnose", "whatif",
           "Diagnosis", "Finding", "compare", "Comparison", "LaunchError", "LaunchConfigError",
           "NotebookWorkerError", "CudaForkError", "WorkerFailed", "WorkerTimeout"]
