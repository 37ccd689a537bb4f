"""ddp-lessons: measure why a DDP run is slower on several GPUs than on one.

Three homes, arrows pointing down (tests/test_architecture.py):

- `tool`: what a practitioner imports; `import ddp_lessons` loads it and
  nothing else, and the names below come from it;
- `course`: the course's own machinery (options, exercises, replay of
  recorded runs, verdicts on a diagnosis, the timer's validation);
- `cases`: `intro` (notebook 00), `case1` (01-03), `case2` (04-06), `own` (07);
- `cli`: `python -m ddp_lessons COMMAND`.

`place` says where a lesson's ranks run on this machine (NCCL with one GPU
each, or gloo on the CPU); `launch` and `run` start workers and return a
`Results` (the ranks' values in rank order, each rank's output in `.logs`).
`StepTimer` times every step of a worker and accounts for the rest of its
time; `diagnose(results)` ranks what cost a run its time, each cause with
what to change and how to check; `compare({name: repeats}, baseline=name)`
puts runs side by side with the spread of their repeats; `whatif(run, link,
world_size)` replays a timed run's buckets through a link (a model).

    from ddp_lessons import StepTimer, compare, diagnose, launch
    results = launch(my_workers.train, kwargs={"epochs": 2}, world_size=2)  # each returns timer.result()
    print(diagnose(results))
"""

from .tool.diagnosis import Comparison, Diagnosis, Finding, compare, diagnose
from .tool.launcher import (CudaForkError, LaunchConfigError, LaunchError, NotebookWorkerError, Placement,
                            Results, WorkerFailed, WorkerTimeout, launch, place, report_progress, run)
from .tool.predict import whatif
from .tool.timing import StepTimer

__version__ = "0.1.0"

__all__ = ["launch", "run", "place", "Placement", "Results", "report_progress", "StepTimer", "diagnose", "whatif",
           "Diagnosis", "Finding", "compare", "Comparison", "LaunchError", "LaunchConfigError",
           "NotebookWorkerError", "CudaForkError", "WorkerFailed", "WorkerTimeout"]
