"""ddp-lessons: measure why a DDP run is slower on several GPUs than on one.

Three homes, arrows pointing down (tests/test_architecture.py):

- `tool`: what a practitioner imports; `import ddp_lessons` loads it and
  nothing else, and the names below come from it;
- `course`: the course's own machinery (options, exercises, replay of
  recorded runs, verdicts on a diagnosis, the timer's validation);
- `cases`: `intro` (notebook 00), `case1` (01-03), `case2` (04-06), `own` (07);
- `cli`: `python -m ddp_lessons COMMAND` (`__main__` runs it).

`place` says where a lesson's ranks run; `launch` and `run` start workers and
return their values in rank order; `StepTimer` times every step of a worker
and accounts for the rest of its time; `diagnose(results)` ranks what cost the
run its time; `compare` puts runs side by side with their spread; `whatif`
replays a timed run's buckets through a link (a model).

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
