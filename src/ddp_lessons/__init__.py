"""ddp-lessons: measure why a DDP run is slower on several GPUs than on one.

Three homes, arrows pointing down (tests/repo/test_architecture.py):

- `tool`: what a practitioner imports; `import ddp_lessons` loads it and
  nothing else, and the names below come from it;
- `course`: the course's own machinery (options, exercises, replay of
  recorded runs, verdicts on a diagnosis, the timer's validation);
- `cases`: `intro` (notebook 00), `case1` (01-03), `case2` (04-06), `own` (07);
- `cli`: `python -m ddp_lessons COMMAND` (`__main__` runs it).

`launch`/`run` start workers (`gather`: every rank's value on rank 0 of a
script that owns its process group); `StepTimer` times every step; `Run` reads
the ranks' results or a record; `diagnose(run)` ranks what cost the run its
time; `compare` sets runs side by side; `whatif` replays buckets over a link;
`doctor` times, diagnoses and tries fixes on an unmodified script.

    from ddp_lessons import Run, StepTimer, diagnose, launch
    run = Run(launch(my_workers.train, kwargs={"epochs": 2}, world_size=2))  # each returns timer.result()
    print(diagnose(run))
"""

from .tool.diagnosis import Comparison, Diagnosis, Finding, compare, diagnose
from .tool.launcher import (CudaForkError, LaunchConfigError, LaunchError, NotebookWorkerError, Placement,
                            Results, WorkerFailed, WorkerTimeout, gather, launch, place, report_progress, run)
from .tool.doctor import Checkup, doctor
from .tool.predict import whatif
from .tool.runs import Rank, Record, Run
from .tool.timing import StepTimer

__version__ = "0.1.0"

__all__ = ["launch", "run", "gather", "Run", "Rank", "Record", "doctor", "Checkup",
           "place", "Placement", "Results", "report_progress", "StepTimer", "diagnose", "whatif",
           "Diagnosis", "Finding", "compare", "Comparison", "LaunchError", "LaunchConfigError",
           "NotebookWorkerError", "CudaForkError", "WorkerFailed", "WorkerTimeout"]
