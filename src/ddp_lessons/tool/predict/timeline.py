"""The timeline: a recorded step's buckets sent through a link, one after another.

Per step after warm-up, the buckets in the order they became ready (`start`
in the timer's full mode: when DDP handed each one to the hook) go through
one stream: a bucket's all-reduce starts when it is ready and the one before
it is done. The backward's compute ends when the last bucket becomes ready
(the timer's own definition of exposed); what the link is still doing after
that is exposed. (The README, "What-if", introduces it; notebook 03 uses it for case 1's gap (`cases.case1.gap`).)
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from ..runs import Step as Recorded
from .links import Link


@dataclass(frozen=True)
class Step:
    """One replayed step (seconds): the recorded step and its exposed all-reduce, the
    predicted busy time, exposed part and step, and each bucket's (start, end) on the link."""
    step: int | None
    recorded: float
    recorded_exposed: float
    busy: float
    exposed: float
    predicted: float
    compute_done: float
    sends: list = field(default_factory=list)
    phases: dict = field(default_factory=dict)

    @property
    def efficiency(self) -> float:
        """Throughput per rank at N ranks against the recorded run: recorded / predicted step."""
        return self.recorded / self.predicted


def replay_step(step, link: Link, world_size: int, compute_factor: float = 1.0) -> Step:
    """Replay one recorded step: a `runs.Step`, or a step of a timer result (it needs `buckets` with
    `start` and `bytes`)."""
    s = step if isinstance(step, Recorded) else Recorded.from_wire(step)
    buckets = sorted(s.buckets, key=lambda b: b.start)
    compute_done = max(b.start for b in buckets) * compute_factor
    free, busy, sends = 0.0, 0.0, []
    for b in buckets:
        t = link.allreduce_time(b.bytes, world_size)
        start = max(b.start * compute_factor, free)  # ready, and the stream is free
        free = start + t
        busy += t
        sends.append((start, free, b.bytes))
    exposed = max(0.0, free - compute_done) if world_size > 1 else 0.0
    recorded_exposed = s.exposed or 0.0
    predicted = (s.step_time - recorded_exposed) * compute_factor + exposed
    phases = {k: (a * compute_factor, b * compute_factor) for k, (a, b) in s.phases.items()}
    return Step(s.step, s.step_time, recorded_exposed, busy, exposed, predicted, compute_done, sends, phases)


@dataclass
class Prediction:
    """What `whatif` returns: every replayed step, the run's epoch (`steps_per_epoch`: the whole
    epoch's steps on one rank), the recorded world size, notes on what it mixes, and all it assumed."""
    source: str
    link: Link
    world_size: int
    steps: list
    steps_per_epoch: float
    compute_factor: float = 1.0
    recorded_world: int = 1
    notes: list = field(default_factory=list)
    epochs: float | None = None
    iterations: int | None = None

    def median(self, what: str) -> float:
        return statistics.median(getattr(s, what) for s in self.steps)

    def spread(self, what: str) -> tuple[float, float]:
        values = [getattr(s, what) for s in self.steps]
        return min(values), max(values)

    @property
    def epoch_recorded(self) -> float:
        """The recorded run's epoch from its median step (its ranks' share of the data each)."""
        return math.ceil(self.steps_per_epoch / self.recorded_world) * self.median("recorded")

    @property
    def epoch_predicted(self) -> float:
        """N ranks' epoch: the whole epoch's steps split N ways (each rank takes ceil(steps / N))."""
        return math.ceil(self.steps_per_epoch / self.world_size) * self.median("predicted")

    @property
    def run_predicted(self) -> float | None:
        """The predicted time of `epochs` epochs or `iterations` steps on N ranks (None if neither given)."""
        if self.epochs is not None:
            return self.epochs * self.epoch_predicted
        if self.iterations is not None:
            return self.iterations * self.median("predicted")
        return None

    def assumptions(self) -> list[str]:
        return [
            f"link {self.link.name}: {self.link.source}",
            f"ring all-reduce on {self.world_size} ranks: 2(n-1)/n x bytes / busbw + 2(n-1) x step latency",
            "one stream: a bucket starts when it is ready and the bucket before it is done",
            "the buckets and their ready times as recorded (DDP on N ranks builds the same buckets)",
            "compute per sample unchanged, the per-rank batch kept"
            + (f"; compute x{self.compute_factor:g} (a slowdown from the communication)"
               if self.compute_factor != 1 else "; no slowdown of compute by communication kernels"),
            "not modelled: waits for a slower rank, the data loader, start-up and evaluation",
        ]

    def __str__(self) -> str:
        from .report import describe
        return describe(self)
