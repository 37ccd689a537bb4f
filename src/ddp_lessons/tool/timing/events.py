"""The timer's public event methods, for code that sees a training loop from outside it (the doctor's
recorder, Lightning's timer): a mark, a batch waited for, a phase set whole, work outside the steps, the
script's own collectives, an optimizer step, a pass over the loader. `StepMarks` (timing.steps) holds the
bookkeeping they report to; nothing outside tool/timing touches it (tests/repo/test_timer_door.py).
"""

from __future__ import annotations

from typing import Any

from . import context


class StepEvents:
    """Mixed into `StepMarks`: the members below are its bookkeeping."""
    enabled: bool
    clock: Any
    _cur: dict
    _steps: list
    _outside: list
    _outside_depth: int
    _epochs: int
    _pass_starts: list
    _loader: dict | None

    def _open_step(self, token): raise NotImplementedError
    def _step_open(self) -> bool: raise NotImplementedError
    def _new_step(self): raise NotImplementedError
    def _optimizer_stepped(self): raise NotImplementedError

    def mark(self):
        """A token of now on the timer's clock (a CUDA event on a GPU), for the methods below."""
        return self.clock.mark()

    def waited_for_batch(self, token, seconds: float, loader=None) -> None:
        """The wait for a batch began at `token` and took `seconds` (host time): it opens the step the
        batch is for; `loader` (a DataLoader) is the one whose settings the result keeps."""
        if not self.enabled or self._outside_depth:
            return
        if self._loader is None and loader is not None:
            self._loader = context.loader_info(loader)
        self._open_step(token)
        self._cur["data"] += seconds

    def begin_pass(self) -> None:
        """A pass over the loader begins (an epoch), driven from outside a loop (Lightning's hooks): the next
        step starts afresh, and `diagnose(run, epochs=...)` counts the pass, as `timer.data` does."""
        if not self.enabled:
            return
        self._new_step()
        self._epochs += 1
        self._pass_starts.append(len(self._steps))

    def phase_span(self, name: str, start, end) -> None:
        """Phase `name` of the open step from token `start` to `end`, set as a whole (hooks that see its
        two ends apart). A step opened by phases alone starts its `batch_waited` seconds before the first."""
        if self.enabled and not self._outside_depth:
            self._cur["phases"][name] = (start, end)

    def batch_waited(self, seconds: float) -> None:
        """The open step waited `seconds` (host time) for its batch, measured by the caller; the step's start
        is then taken that long before its first phase (a step opened by phases alone, as Lightning's is)."""
        if self.enabled and not self._outside_depth:
            self._cur["data"] = seconds

    def outside_span(self, name: str, start, end) -> None:
        """Work outside the steps named `name`, from token `start` to token `end`."""
        if self.enabled:
            self._outside.append((name, start, end))

    def collective(self, start, end) -> None:
        """A collective the script issued itself (not DDP's gradient all-reduce) from token `start` to
        `end`, inside the open step."""
        if self.enabled and self._step_open():
            self._cur["coll"].append((start, end))

    def optimizer_stepped(self) -> None:
        """An optimizer step of the open step (the timer sees torch's own optimizers by itself; call this
        where its global hook is off: `stop_watching_optimizers`)."""
        self._optimizer_stepped()

    def stop_watching_optimizers(self) -> None:
        """Leave telling optimizer steps to the caller (`optimizer_stepped`)."""
        context.unwatch(self)

    def step_is_open(self) -> bool:
        return self._step_open()

    @staticmethod
    def loader_settings(loader) -> dict | None:
        """A DataLoader's settings as the result keeps them (workers, pinning, its sampler)."""
        return context.loader_info(loader)

    @property
    def closed_steps(self) -> int:
        """Steps closed so far."""
        return len(self._steps)

    def phase_end(self, name: str):
        """The token at which phase `name` of the open step ended (None if it has not)."""
        span = self._cur["phases"].get(name)
        return span[1] if span else None

    def drop_open_step(self):
        """Forget the open step and return its first token (None if none was open): a batch waited for
        and then evaluated was the evaluation's."""
        start = self._cur["start"]
        self._new_step()
        return start

    def wrap_comm_hook(self, hook, state) -> None:
        """Send with `hook` and `state` (a hook the script registers after the timer, mode "full")."""
        self._wrap(hook, state)

    def _wrap(self, hook, state) -> None:  # StepTimer's
        raise NotImplementedError

    def _computed(self) -> None:
        """The backward's compute ended (an autograd final callback: `timing.compute_end`)."""
        if self.enabled and not self._outside_depth:
            self._cur["computed"] = self.clock.mark()

