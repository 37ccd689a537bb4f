"""The timer's context managers: a phase of the current step, and named work
outside the steps (evaluation, checkpointing, logging).

A phase opens the current step if none is open (a step starts at its first
mark). Work between steps goes in `timer.outside(name)`; inside such a block
phases and `timer.data` waits are part of that outside work and open no step.
"""

from __future__ import annotations


class Phase:
    """`with timer.phase(name):` without a generator per call."""
    __slots__ = ("timer", "name", "start")

    def __init__(self, timer, name):
        self.timer, self.name = timer, name

    def __enter__(self):
        self.start = self.timer.clock.mark()
        self.timer._open_step(self.start)

    def __exit__(self, *exc):
        self.timer._cur["phases"][self.name] = (self.start, self.timer.clock.mark())
        return False


class Outside:
    """`with timer.outside(name):` named work between steps, kept as an interval."""
    __slots__ = ("timer", "name", "start")

    def __init__(self, timer, name):
        self.timer, self.name = timer, name

    def __enter__(self):
        t = self.timer
        t._close_unfinished()  # phases left open by a step never closed become outside work
        t._outside_depth += 1
        self.start = t.clock.mark()

    def __exit__(self, *exc):
        t = self.timer
        t._outside_depth -= 1
        if t._outside_depth == 0:  # nested outside blocks count once, under the outer name
            t._outside.append((self.name, self.start, t.clock.mark()))
        return False


class Off:
    """A context manager that does nothing (a disabled timer; a phase inside `outside`)."""

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


OFF = Off()
