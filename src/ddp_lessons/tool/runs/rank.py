"""One rank's result read through named accessors: `Rank` (its steps as `Step`s, read once), and
`timer_of`, which finds the timer's result in what a worker returned."""

from __future__ import annotations

import copy
import statistics

from .step import Step

KEY = "timer"   # where a worker's dict holds its StepTimer result
# Per-step numbers that are positions, flags or labels, not durations: no median of them.
NOT_DURATIONS = ("step", "t_start", "wait_for", "ready", "sync", "forwards", "optimizer_steps", "computed",
                 "collective_calls")
WARMUP = 2      # DDP builds its buckets in step 0 and rebuilds them after it: left out of medians


def timer_of(value) -> dict | None:
    """The StepTimer result in one rank's value: value["timer"], or the value itself; None if neither.
    A dict is a timer's result when its steps are the timer's (a list of dicts with `step_time`), so a
    worker's own key called "steps" is not mistaken for it."""
    if isinstance(value, Rank):
        return value.timer
    if not isinstance(value, dict):
        return None
    for cand in (value.get(KEY), value):
        if isinstance(cand, dict) and _is_timer(cand):
            return cand
    return None


def _is_timer(d: dict) -> bool:
    steps = d.get("steps")
    if not isinstance(steps, list):
        return False
    if steps:
        return isinstance(steps[0], dict) and "step_time" in steps[0]
    return "comm_source" in d or "account" in d or d.get("kind") == "ddp-lessons/step-timer"


class Rank:
    """One rank of a run: `timer` (its StepTimer result, as JSON), `value` (all the worker returned;
    `rank["key"]` reads the worker's own keys) and `steps()` (its steps as `Step`s). Reads, never writes,
    what it is given. Defined in notebook 00_first_launch."""

    def __init__(self, value) -> None:
        timer = timer_of(value)
        if timer is None:
            raise ValueError(f"no StepTimer result here: return timer.result(), or a dict with it under {KEY!r}, "
                             "from the worker")
        self.value, self.timer = value, timer
        self._steps: tuple[Step, ...] = tuple(Step.from_wire(s) for s in timer["steps"])

    def __getitem__(self, key):
        return self.value[key]

    def get(self, key, default=None):
        return self.value.get(key, default) if isinstance(self.value, dict) else default

    def __repr__(self) -> str:
        return f"Rank({self.rank} of {self.world_size}, {len(self._steps)} steps)"

    # what ran where
    rank = property(lambda self: int(self.timer.get("rank", 0)))
    world_size = property(lambda self: int(self.timer.get("world_size") or 1))
    device = property(lambda self: str(self.timer.get("device", "cpu")))
    backend = property(lambda self: self.timer.get("backend"))
    threads = property(lambda self: self.timer.get("threads"))
    cores = property(lambda self: self.timer.get("cores"))
    host = property(lambda self: self.timer.get("host"))
    mode = property(lambda self: self.timer.get("mode"))
    batch_size = property(lambda self: self.timer.get("batch_size"))
    account = property(lambda self: self.timer.get("account"))
    outside = property(lambda self: self.timer.get("outside") or [])
    model = property(lambda self: self.timer.get("model") or {})
    loader = property(lambda self: self.timer.get("loader"))
    on_gpu = property(lambda self: self.device.startswith("cuda"))
    # how it was timed: the clock's facts, DDP's sampled timings, the doctor's own block ({} where none)
    clock = property(lambda self: self.timer.get("clock") or {})
    ddp_logging = property(lambda self: self.timer.get("ddp_logging") or {})
    doctor = property(lambda self: self.timer.get("doctor") or {})
    flight_recorder = property(lambda self: self.timer.get("flight_recorder") or {})
    comm_source = property(lambda self: self.timer.get("comm_source", "none"))
    start_method = property(lambda self: self.timer.get("start_method"))
    data_passes = property(lambda self: self.timer.get("data_passes"))
    pass_starts = property(lambda self: self.timer.get("pass_starts"))

    def steps(self, skip: int = 0) -> list[Step]:
        """The timed steps (micro-steps under accumulation), leaving out the first `skip`."""
        return list(self._steps[skip:])

    def with_waits(self, waits: list) -> Rank:
        """A copy of this rank whose steps carry `waits` (one per step; None leaves a step as it is)."""
        out = copy.copy(self)
        out._steps = tuple(s if w is None else s.with_wait(w) for s, w in zip(self._steps, waits, strict=True))
        return out

    def median_step(self, skip: int = WARMUP) -> dict:
        """Median of every per-step number (by its name in the timer's result), leaving out the first
        `skip` steps (all kept when there are no more); each number over the steps that have it; {}
        without steps."""
        every = self._steps
        steps = every[skip:] or every
        keys = dict.fromkeys(k for s in steps for k, v in s.wire.items()
                             if k not in NOT_DURATIONS and isinstance(v, (int, float)) and not isinstance(v, bool))
        return {k: statistics.median(v for s in steps if isinstance(v := s.wire.get(k), (int, float))) for k in keys}

    def median(self, name: str, skip: int = WARMUP) -> float:
        """One number of `median_step(skip)`: the median of the per-step number `name` (KeyError where no
        step has it)."""
        return self.median_step(skip)[name]

    def knows_optimizer_steps(self) -> bool:
        """Whether the timer saw torch's optimizer steps (timers from before it did: every step is one)."""
        return any(s.optimizer_steps is not None for s in self._steps)

    def iterations(self, skip: int = WARMUP) -> list[float]:
        """Seconds per optimizer step (its micro-steps from the first one's start to the last one's
        end), leaving out the first `skip` optimizer steps; each step is one where the timer did not
        see optimizer steps."""
        steps = self._steps
        if not self.knows_optimizer_steps() or not any(s.optimizer_steps for s in steps):
            return [s.step_time for s in steps][skip:]
        out, first = [], None
        for s in steps:
            first = s if first is None else first
            if s.optimizer_steps:
                out.append((s.t_start or 0.0) + s.step_time - (first.t_start or 0.0))
                first = None
        return out[skip:]
