"""Per-step timing on every rank (notebook 00_first_launch introduces it).

timer (StepTimer: the clocks, the all-reduce, the result) ; steps (the step bookkeeping: phases,
outside work, data waits, micro-steps and optimizer steps) ; events (its public event methods, for code
that sees a loop from outside it) ; marks (a phase's and outside work's
context managers, a step's numbers) ; context (what torch's hooks tell the timer: optimizer steps,
forwards that all-reduce, the loader and model) ; compute_end (a backward's compute end, marked from an
autograd callback: mode "light"'s split of the backward) ; account (where all of a rank's time went) ; sync
(one time axis for every rank, the wait for a slower rank) ; clocks (the host clock, a ring of CUDA
events) ; comm (the timing comm hook) ; light (on GPUs: DDP's own C++ timings and NCCL's flight
recorder). It only measures: what DDP sends is the hook it is given. A result is read back with
`ddp_lessons.Run`.
"""

from .light import ddp_logging_times
from .timer import StepTimer

__all__ = ["StepTimer", "ddp_logging_times"]
