"""The timer's clocks: the host's `perf_counter`, or CUDA events from a ring.

A clock hands out a token per `mark()` and turns tokens into seconds since
its start with `seconds(tokens)`. The host clock (`HostClock`)'s token is the time itself;
`EventRing` (the CUDA clock, made by `cuda_clock`) allocates its events once and records them
again and again, reading the older half when the ring is full.
"""

from __future__ import annotations

import time


class HostClock:
    """`time.perf_counter`: the token is the time."""

    def mark(self):
        return time.perf_counter()

    def seconds(self, marks):
        return list(marks)

    def host_time(self, token) -> float:
        """The host's perf_counter when `token` was made."""
        return token


class EventRing:
    """Marks on events allocated once (`size` of them) and re-recorded.

    `make_event()` returns an object with `record()`, `synchronize()` and
    `elapsed_time(other)` (milliseconds from self to other), as
    `torch.cuda.Event(enable_timing=True)` has. `finish()` (optional)
    waits for everything recorded (a device synchronise); `record(ev)`
    (optional) records an event; `prime=True` records every event once at
    construction, so that none is created inside the timed loop.

    A mark is one `record()` on the current stream, never an `Event()` construction. Nothing is
    read while the ring has room; when it is full, the older half is read (`mark`) and those slots
    are recorded again. `seconds()` synchronises once and reads the rest. The factory lets the
    bookkeeping be tested on CPUs with fake events (tests/tool/test_timing.py).
    """

    def __init__(self, make_event, size: int = 4096, finish=None, record=None, prime=False):
        if size < 2:
            raise ValueError("an event ring needs at least 2 events")
        self._events = [make_event() for _ in range(size)]
        self._finish = finish
        self._record = record or (lambda ev: ev.record())
        if prime:  # record each once now: CUDA creates an event at its first record
            for ev in self._events:
                self._record(ev)
        self._ref = make_event()          # time zero; never re-recorded
        self._record(self._ref)
        self._prev = self._ref            # the last event read, to chain from
        self._prev_ms = 0.0
        self._ms: list[float] = []        # ms since time zero, by token
        self._n = 0                       # marks handed out
        self._host: list[float] = []      # the host's perf_counter at each mark, by token
        self.harvests = 0                 # how often the ring was read while marking

    def mark(self) -> int:
        n, size = self._n, len(self._events)
        # Keep one slot free: the slot of the last event read must not be re-recorded
        # before the next read chains from it.
        if n - len(self._ms) >= size - 1:
            # the older half: every event there was recorded hundreds of marks ago, so it has long
            # completed and reading it does not stall the queue
            self._read(len(self._ms) + size // 2)
            self.harvests += 1
        self._record(self._events[n % size])
        self._host.append(time.perf_counter())
        self._n = n + 1
        return n

    def host_time(self, token) -> float:
        return self._host[token]

    def host_seconds(self, token) -> float:
        """The host's clock (perf_counter, seconds) when mark `token` was made: how long the host took
        between two marks, against the device's time between them (`seconds`)."""
        return self._host[token]

    def _read(self, upto: int) -> None:
        """Turn tokens len(self._ms) .. upto-1 into times. Recorded in order on the stream(s) of the
        marks, hundreds of marks ago: one wait on the newest of them (at once when it is done) stands
        for all, and each is then only read."""
        size, prev, t = len(self._events), self._prev, self._prev_ms
        first = len(self._ms)
        if upto > first:
            self._events[(upto - 1) % size].synchronize()
        for i in range(first, upto):
            ev = self._events[i % size]
            # chained event to event (a small float32 number) and summed in double precision,
            # so hours of marks lose no resolution to float32
            t += prev.elapsed_time(ev)
            self._ms.append(t)
            prev = ev
        self._prev, self._prev_ms = prev, t

    def seconds(self, marks) -> list:
        """Seconds since the ring's start for each token (reads what is left)."""
        if self._finish is not None:
            self._finish()  # note: CPU-GPU sync point, once, when results are asked for
        self._read(self._n)
        return [self._ms[m] / 1e3 for m in marks]


def cuda_clock(device, size: int = 4096) -> EventRing:
    """An `EventRing` of `torch.cuda.Event(enable_timing=True)` on `device`."""
    import torch

    with torch.cuda.device(device):
        return EventRing(lambda: torch.cuda.Event(enable_timing=True), size,
                         finish=lambda: torch.cuda.synchronize(device), record=_fast_record(device),
                         prime=True)


def _fast_record(device):
    """`event.record()` on the current stream without building a `Stream` object per
    call (what `torch.cuda.Event.record` does): the stream objects are cached by
    the current stream's id. None (the plain `record()`) where torch lacks the calls."""
    import torch

    try:
        get, base = torch._C._cuda_getCurrentStream, torch._C._CudaEventBase.record
        index = device.index if device.index is not None else torch.cuda.current_device()
        streams = {}

        def record(ev):
            key = get(index)
            s = streams.get(key)
            if s is None:
                s = streams[key] = torch.cuda.Stream(stream_id=key[0], device_index=key[1], device_type=key[2])
            base(ev, s)
        probe = torch.cuda.Event(enable_timing=True)
        record(probe)
        probe.synchronize()
        return record
    except Exception:  # noqa: BLE001 - fall back to the documented call
        return None
