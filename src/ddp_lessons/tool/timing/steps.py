"""The timer's bookkeeping of steps: which step is open, what its marks are, when it closes.

`StepMarks` holds the current step and the closed ones; `StepTimer` (timing.timer) adds the clocks,
the all-reduce timing and the result. A step is one forward and backward (a micro-step under gradient
accumulation); torch's own hooks (`timing.context`) tell the timer which steps stepped the optimizer
and which forwards will all-reduce.
"""

from __future__ import annotations

from typing import Any

import time

from . import compute_end, context
from .events import StepEvents
from .marks import OFF, DataWait, Outside, Phase


class StepMarks(StepEvents):
    """The marks API of `StepTimer` (phase, begin/end, outside, data, data_wait, step_done)."""
    # set by StepTimer.__init__
    enabled: bool
    clock: Any
    _steps: list
    _outside: list
    _outside_depth: int
    _unfinished: int
    _epochs: int
    _pass_starts: list
    _loader: dict | None
    _ddp: Any
    _fr: Any

    # -- marks ---------------------------------------------------------------
    def _new_step(self):
        # opened by its first mark; forwards with gradients, their all-reduce (sync), optimizer steps;
        # "computed": the backward's compute end (mode "light", `timing.compute_end`); "coll": the script's
        # own collectives in the step, as (start, end) marks
        self._cur = {"start": None, "phases": {}, "data": 0.0, "forwards": 0, "sync": None, "opt": 0,
                     "computed": None, "coll": []}
        self._buckets = []

    def _open_step(self, token):
        if self._cur["start"] is None:
            self._cur["start"] = token

    def _step_open(self) -> bool:
        return self._cur["start"] is not None or bool(self._cur["phases"])

    def _close_unfinished(self):
        """A step that was opened but never closed by `step_done()` (the next `timer.data` wait or
        `result()` came first) becomes outside work: its phases under their own names, counted in
        `unfinished_steps`."""
        if self.enabled and self._step_open():
            self._outside += [(name, a, b) for name, (a, b) in self._cur["phases"].items()]
            self._unfinished += 1
            self._new_step()

    def _optimizer_stepped(self):
        """torch's optimizer hook: an optimizer step belongs to the open step, else to the step just closed."""
        if not self.enabled or self._outside_depth:
            return
        if not self._step_open() and self._steps and not self._cur["forwards"]:
            self._steps[-1]["opt"] += 1
        else:
            self._cur["opt"] += 1

    def _forwarded(self, sync: bool):
        """The DDP model's forward with gradients (a micro-step); `sync`: its backward will all-reduce."""
        if not self.enabled or self._outside_depth:
            return
        cur = self._cur
        if cur["forwards"] and ("backward" in cur["phases"] or self._buckets):
            raise ValueError("a second forward of the DDP model in one timer step, after that step's backward: "
                             "each forward and backward is a step (with gradient accumulation, a micro-step); "
                             "call timer.step_done() after each")
        cur["forwards"] += 1
        cur["sync"] = sync if cur["sync"] is None else cur["sync"] or sync

    def phase(self, name: str):
        """Time the enclosed block as phase `name` of the current step (opening it if none is open).
        Between steps it opens a step too: without `timer.data` the timer cannot tell it from the next
        step's first phase, so time work between steps with `outside`."""
        if name in context.RESERVED:
            raise ValueError(f"phase name {name!r} is one of the timer's own per-step numbers: choose another "
                             "(a batch fetched inside a step: timer.data_wait())")
        return Phase(self, name) if self.enabled and not self._outside_depth else OFF

    def begin(self, name: str, token=None) -> None:
        """Start phase `name` without a `with` block (hooks that see a start and an end apart), now or at
        `token` (a `mark()` already made: one mark can end one phase and begin the next)."""
        if self.enabled and not self._outside_depth:
            self._open_phase = getattr(self, "_open_phase", {})
            token = self.clock.mark() if token is None else token
            self._open_step(token)
            self._open_phase[name] = token

    def end(self, name: str, token=None) -> None:
        """End phase `name` started by `begin`, now or at `token` (nothing if it was not started)."""
        start = getattr(self, "_open_phase", {}).pop(name, None)
        if start is not None:
            self._cur["phases"][name] = (start, self.clock.mark() if token is None else token)

    def forward_began(self, sync: bool) -> None:
        """A forward with gradients of the DDP model (a micro-step); `sync`: its backward will all-reduce
        (the timer sees this by itself unless built with `watch_model=False`)."""
        self._forwarded(sync)

    def arm_compute_end(self, output) -> bool:
        """Have the backward through `output` mark its compute's end (mode "light": `timing.compute_end`)."""
        marker = getattr(self, "_end_marker", None)
        if marker is None:
            marker = self._end_marker = compute_end.EndMarker(getattr(self, "model", None), self._computed)
        return marker.arm(output)

    @property
    def compute_end_per_step(self) -> bool:
        """True once the compute end is marked by a hook put on each step's output (a step left the hooked
        parameter unused), False while the one pre-hook marks it."""
        marker = getattr(self, "_end_marker", None)
        return marker is not None and marker.per_step

    def _drop_end_marker(self) -> None:
        marker = getattr(self, "_end_marker", None)
        if marker is not None:
            marker.remove()

    def outside(self, name: str):
        """Time the enclosed block as work outside the steps named `name` (e.g. "eval"), kept as a named
        interval; phases and `timer.data` waits inside it belong to it. Raises inside a step whose batch
        came from `timer.data`."""
        if not self.enabled:
            return OFF
        if not self._outside_depth and self._cur.get("data_opened"):
            raise RuntimeError(f"timer.outside({name!r}) inside a step (its batch came from timer.data and "
                               "step_done() has not closed it): call it after step_done(), or time it "
                               "as timer.phase()")
        return Outside(self, name)

    def data_wait(self):
        """Time the enclosed block as waiting for data in the current step (a batch fetched in the middle
        of a step, as nanoGPT's loop fetches the next one after the forward); opens the step if none is."""
        return DataWait(self) if self.enabled and not self._outside_depth else OFF

    def data(self, iterable):
        """Iterate like `iterable`, timing each wait for the next batch (always host time: the host
        waits for the loader). The wait opens the step the batch is for; inside `outside()` it is not timed."""
        it = None
        if self._loader is None:
            self._loader = context.loader_info(iterable)
        while True:
            timed = self.enabled and not self._outside_depth
            if timed:
                self._close_unfinished()
                token = self.clock.mark()
            t0 = time.perf_counter()
            try:
                if it is None:
                    it = iter(iterable)  # a loader's start counts as waiting for data
                    self._epochs += 1
                    self._pass_starts.append(len(self._steps))
                batch = next(it)
            except StopIteration:
                return
            if timed:
                self._open_step(token)
                self._cur["data_opened"] = True
                self._cur["data"] += time.perf_counter() - t0
            yield batch

    def _bucket_done(self, index, ready, done, sent_bytes, grad_bytes, sent=None):
        self._buckets.append((index, ready, done, sent_bytes, grad_bytes, ready if sent is None else sent))

    def step_done(self, end=None):
        """Close the current step (call once per optimizer step or micro-step)."""
        if not self.enabled:
            return
        cur = self._cur
        cur["end"] = self.clock.mark() if end is None else end
        cur["buckets"] = sorted(self._buckets, key=lambda b: b[0])
        if self._optimizer_only(cur):  # an optimizer step timed apart from its micro-step: the same step
            prev = self._steps[-1]
            prev["phases"].update(cur["phases"])
            prev["coll"] += cur["coll"]
            prev["opt"] += cur["opt"]
            prev["end"] = cur["end"]
            if self._fr is not None:
                self._fr.extend_last()
            self._new_step()
            return
        self._steps.append(cur)
        if self._ddp is not None:
            self._ddp.read(len(self._steps) - 1)
        if self._fr is not None:
            self._fr.step_done()
        self._new_step()

    def _optimizer_only(self, cur) -> bool:
        """A step of an optimizer step alone (no forward, backward, batch or bucket) right after a
        micro-step that had none: the loop timed `opt.step()` after closing the micro-step."""
        if not self._steps or cur["forwards"] or cur["data"] or cur["buckets"] or cur.get("data_opened") or \
                cur["computed"] is not None:
            return False
        prev = self._steps[-1]
        did_work = prev["forwards"] or "backward" in prev["phases"] or prev["buckets"]
        return bool(did_work and not prev["opt"] and (cur["opt"] or "optimizer" in cur["phases"])
                    and "backward" not in cur["phases"] and not set(cur["phases"]) & set(prev["phases"]))

