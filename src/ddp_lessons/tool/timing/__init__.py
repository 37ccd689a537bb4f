"""Per-step timing on every rank (notebook 00_first_launch introduces it).

timer (StepTimer: the marks, the step records) ; marks (a phase of the step,
named work outside it) ; account (where all of a rank's time went) ; sync (one
time axis for every rank, the wait for a slower rank) ; clocks (the host
clock, a ring of CUDA events) ; comm (the timing comm hook; per-step
all-reduce numbers) ; light (on GPUs: DDP's own C++ timings and NCCL's
flight recorder) ; reading (a result read back: `timed_steps`, `rank_account`,
`median_step`). It only measures: what DDP sends is the hook it is given.
"""

from .reading import KEY, ddp_logging_times, median_step, rank_account, timed_steps, timer_result
from .timer import StepTimer

__all__ = ["StepTimer", "KEY", "timer_result", "timed_steps", "rank_account", "median_step", "ddp_logging_times"]
