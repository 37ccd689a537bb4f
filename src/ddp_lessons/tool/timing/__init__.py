"""Per-step timing on every rank (notebook 00_first_launch introduces it).

timer (StepTimer: the marks, the step records, `median_step`) ; clocks (the
host clock, a ring of CUDA events allocated once) ; comm (the timing comm
hook that wraps the hook doing the sending; per-step all-reduce numbers) ;
light (on GPUs: DDP's own C++ timings and NCCL's flight recorder, so the
timer adds no Python hook to DDP's all-reduce). It only measures: what DDP
sends is the hook it is given (`ddp_lessons.tool.hooks`).
"""

from .reading import KEY, account, ddp_logging_times, median_step, timed_steps, timer_result
from .timer import StepTimer

__all__ = ["StepTimer", "KEY", "timer_result", "timed_steps", "account", "median_step", "ddp_logging_times"]
