"""The timer's context managers: a phase of the current step, and named work
outside the steps (evaluation, checkpointing, logging).

A phase opens the current step if none is open (a step starts at its first
mark). Work between steps goes in `timer.outside(name)`; inside such a block
phases and `timer.data` waits are part of that outside work and open no step.
`step_numbers` turns a closed step's marks into its numbers at `result()`.
"""

from __future__ import annotations

import time

from .comm import _comm_numbers


class Phase:
    """`with timer.phase(name):` without a generator per call."""
    __slots__ = ("timer", "name", "start")

    def __init__(self, timer, name):
        self.timer, self.name = timer, name

    def __enter__(self):
        if self.name in self.timer._cur["phases"]:
            # one interval per phase and step: a second one would overwrite the first, silently
            raise ValueError(f"phase {self.name!r} entered twice in one step: the timer keeps one interval per "
                             "phase and step. With gradient accumulation call timer.step_done() after each "
                             "micro-step (each is a step), or give each interval its own name")
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


class DataWait:
    """`with timer.data_wait():` a batch fetched in the middle of a step, added to its data wait."""
    __slots__ = ("timer", "t0")

    def __init__(self, timer):
        self.timer = timer

    def __enter__(self):
        self.timer._open_step(self.timer.clock.mark())
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        self.timer._cur["data"] += time.perf_counter() - self.t0
        return False


class Off:
    """A context manager that does nothing (a disabled timer; a phase inside `outside`)."""

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


OFF = Off()


def step_marks(s) -> list:
    """A closed step's tokens, in the order `step_numbers` reads their times back."""
    out = [s["start"] if s["start"] is not None else s["end"], s["end"]]
    for a, b in s["phases"].values():
        out += [a, b]
    for _, ready, done, _, _, sent in s["buckets"]:
        out += [ready, done, sent]
    if s.get("computed") is not None:
        out.append(s["computed"])
    for a, b in s.get("coll") or ():
        out += [a, b]
    return out


def step_numbers(i, s, values, origin, host=None, host_ref=None):
    """One step's numbers (seconds since the reference `origin`) from its marks,
    read from `values` in the order `step_marks` listed them; `host` (a CUDA clock's
    `host_seconds`) adds each phase's host-side span, the time the host took to issue it, and `lag`: how
    long after the host issued the step's first mark the device reached it (`host_ref`: the host's clock
    at the reference)."""
    start, end = next(values), next(values)
    phases = {k: (next(values) - start, next(values) - start) for k in s["phases"]}
    if s["start"] is None and phases:  # opened by phases set directly (Lightning): the wait precedes them
        shift = min(a for a, _ in phases.values()) - s["data"]
        start += shift
        phases = {k: (a - shift, b - shift) for k, (a, b) in phases.items()}
    buckets = []
    for idx, _, _, sent_bytes, grad, _ in s["buckets"]:
        a, b, c = next(values) - start, next(values) - start, next(values) - start
        buckets.append({"index": idx, "start": a, "end": b, "bytes": sent_bytes, "grad_bytes": grad, "sent": c})
    computed = next(values) - start if s.get("computed") is not None else None
    coll = [(next(values) - start, next(values) - start) for _ in s.get("coll") or ()]
    out = {"step": i, "t_start": start - origin, "step_time": end - start, "data": s["data"],
           "phases": phases, "buckets": buckets, "optimizer_steps": s["opt"], "forwards": s["forwards"],
           "sync": s["sync"]}
    if host is not None:
        out["host"] = {k: host(b) - host(a) for k, (a, b) in s["phases"].items()}
        first = s["start"] if s["start"] is not None else s["end"]
        if host_ref is not None:   # >= the launch latency; about that where the device's queue was empty
            out["lag"] = max(0.0, (start - origin) - (host(first) - host_ref))
    if phases:
        # the step's start to its first phase on the timer's clock: on a GPU the time the device saw
        # between the wait's first mark and the first phase's (0 when the host ran ahead of the device
        # and its wait hid behind queued work; the wait itself where the device sat idle for the batch)
        out["data_stall"] = max(0.0, min(a for a, _ in phases.values()))
    out.update({k: b - a for k, (a, b) in phases.items()})
    out.update(_comm_numbers(buckets, phases.get("backward")))
    if computed is not None and "backward" in phases:
        # mode "light": the backward split at its compute's end (an autograd callback before DDP's wait)
        bwd = phases["backward"]
        out["computed"] = computed
        out["exposed"] = max(0.0, bwd[1] - max(computed, bwd[0]))
        out["backward_compute"] = max(0.0, (bwd[1] - bwd[0]) - out["exposed"])
    if coll:
        out["collectives"] = sum(b - a for a, b in coll)
        out["collective_calls"] = len(coll)
        out["collective_spans"] = coll
    return out
