"""Start workers from a notebook or a script and get their results back.

checks (refusals before anything starts) -> placement (where the ranks
run: NCCL with one GPU each, or gloo on the CPU) -> parent (the run: processes,
pipes, private directory) -> child (what each worker process does) ;
reports (the errors a failed run raises) ; cleanup (what a stopped or killed
launch leaves: run directories swept, SIGTERM turned into a clean stop) ;
errors ; progress (the notebook widget) ; results ; torchrun (`run`: the
same worker under `launch` or `torchrun`).
"""

from .checks import visible_gpus
from .child import report_progress
from .errors import CudaForkError, LaunchConfigError, LaunchError, NotebookWorkerError, WorkerFailed, WorkerTimeout
from .parent import launch
from .placement import Placement, place
from .results import Results
from .torchrun import gather, run

__all__ = ["launch", "run", "gather", "Results", "place", "Placement", "report_progress", "visible_gpus", "LaunchError",
           "LaunchConfigError", "NotebookWorkerError", "CudaForkError", "WorkerFailed", "WorkerTimeout"]
