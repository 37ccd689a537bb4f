"""One rank's recorder inside a process the doctor started: it turns what torch's hooks report
(the model's forwards, `autograd.backward`, the optimizer's steps, the loader's batches, `torch.save`)
into a `StepTimer`'s steps, and writes the timer's result to the run's folder when the script ends.

A micro-step opens at the wait for its batch (or its forward with gradients) and closes at its
optimizer step, else at its backward's end once the next batch, forward or evaluation begins.
Forwards without gradients between steps are evaluation; `torch.save` is a checkpoint; both become
named work outside the steps. The recorder keeps the host time its own hooks took (`hook_s`).
Loaded by its path (see `inject`): it imports the package's timer only when a model is built.
"""

from __future__ import annotations

from typing import Any

import json
import os
import time

EVALUATION = "evaluation (forwards without gradients)"
CHECKPOINT = "checkpoint (torch.save)"


class Recorder:
    # why a rank's result was written (its "reason") where the script reached its end; else it raised
    # ("the script raised RuntimeError") or was terminated
    DESTROYED, ENDED, STOPPED = ("the script destroyed its process group", "the script ended",
                                 "stopped after --steps")
    REACHED_END = (DESTROYED, ENDED, STOPPED)

    def __init__(self, out_dir: str, steps: int | None = None, warmup: int = 3):
        self.out_dir, self.steps, self.warmup = out_dir, steps, warmup
        self.pid = os.getpid()
        self.timer: Any = None
        self.model: Any = None
        self.models: list = []        # (module, is the DDP wrapper) whose forwards are training forwards
        self.opened = False           # a micro-step is open
        self.bwd_end = None           # the open micro-step's backward end (a clock token)
        self.eval_start = self.eval_end = None
        self.depth = 0                # nesting of forwards of our models (DDP calls its module inside)
        self.opt_steps = 0
        self.window: list = [None, None]    # host perf_counter: warm-up's end, the last optimizer step's end
        self.hook_s, self.hook_calls = 0.0, 0
        self.notes: list[str] = []
        self.finished = self.stopping = False
        self.knobs: dict = {}         # what --confirm set at construction

    # -- the timer -------------------------------------------------------------
    def attach(self, ddp) -> None:
        """A DDP model was built: time it (the first one; a second is noted, not timed)."""
        from ddp_lessons.tool.timing import StepTimer
        if self.finished:
            return
        if self.timer is not None:
            self.notes.append("a second DistributedDataParallel model was built: only the first is timed")
            return
        self.timer = StepTimer(ddp, collectives=False)
        self._own_optimizer_hook()
        self.model = ddp
        self.models = [(ddp, True), (ddp.module, False)]

    def adopt_hook(self, state, hook) -> None:
        """The script registers its own comm hook: the timer's hook wraps it (mode "full")."""
        self.timer._wrap(hook, state)

    def plain(self, module) -> None:
        """A model trained without DDP (a 1-process baseline): time its steps, phases and waits only."""
        from ddp_lessons.tool.timing import StepTimer
        if self.finished:
            return
        self.timer = StepTimer(module, collectives=False)
        self._own_optimizer_hook()
        self.model = module
        self.models = [(module, False)]

    def _own_optimizer_hook(self):
        """The recorder tells the timer of each optimizer step itself (before it closes the step), so the
        timer's own global hook, which would run after the recorder's, is taken off."""
        from ddp_lessons.tool.timing import context
        context.unwatch(self.timer)

    def _mark(self):
        return self.timer.clock.mark()

    # -- events ----------------------------------------------------------------
    def forward(self, module, grad: bool) -> None:
        if self.depth or self.timer is None:
            return
        if grad:
            self._end_eval()
            if self.opened and self.bwd_end is not None:   # the next micro-step: close the last one
                self._close(self.bwd_end)
            self.opened = True
            self.timer.begin("forward")
        else:
            if self.opened and self.bwd_end is not None:
                self._close(self.bwd_end)
            start = self._mark()
            if self.opened:   # a batch waited for, then evaluated: the wait was the evaluation's
                start = self.timer._cur["start"]
                self.timer._new_step()
                self.opened = False
            if self.eval_start is None:
                self.eval_start = start

    def forward_done(self, grad: bool) -> None:
        if self.depth or self.timer is None:
            return
        if grad and self.opened:
            self.timer.end("forward")
        elif not grad and self.eval_start is not None:
            self.eval_end = self._mark()

    def backward(self, begin: bool) -> None:
        if not self.opened or self.timer is None:
            return
        if begin:
            name = "backward" if "backward" not in self.timer._cur["phases"] else "backward 2"
            self._bwd_name = name
            self.timer.begin(name)
        else:
            self.timer.end(self._bwd_name)
            self.bwd_end = self.timer._cur["phases"][self._bwd_name][1]

    def optimizer(self, begin: bool) -> None:
        if self.timer is None or not self.opened:
            return
        if begin:
            self.timer.begin("optimizer")
            return
        self.timer.end("optimizer")
        self.timer._optimizer_stepped()
        self._close()
        self.opt_steps += 1
        now = time.perf_counter()
        if self.opt_steps == self.warmup:
            self.window[0] = now
        elif self.opt_steps > self.warmup:
            self.window[1] = now
        if self.steps and self.opt_steps == self.warmup + self.steps:
            self.stopping = True

    def data(self, begin: bool, token=None, loader=None):
        """Around a loader's `next()`: returns the token `begin` made, to hand back at the end; the
        loader whose batches open the steps is the one whose settings the result keeps."""
        if self.timer is None:
            return None
        if begin:
            if self.opened and self.bwd_end is not None:
                self._close(self.bwd_end)
            return (self._mark(), time.perf_counter())
        if token is None or self.eval_start is not None:
            return None   # inside an evaluation: its own time
        mark, t0 = token
        if self.timer._loader is None and loader is not None:
            from ddp_lessons.tool.timing.context import loader_info
            self.timer._loader = loader_info(loader)
        self.timer._open_step(mark)
        self.timer._cur["data"] += time.perf_counter() - t0
        self.opened = True
        return None

    def outside(self, name: str, begin: bool, token=None):
        if self.timer is None:
            return None
        if begin:
            if self.opened and self.bwd_end is not None:
                self._close(self.bwd_end)
            self._end_eval()
            return self._mark()
        if token is not None:
            self.timer._outside.append((name, token, self._mark()))
        return None

    def _end_eval(self):
        if self.eval_start is not None:
            end = self.eval_end if self.eval_end is not None else self._mark()
            self.timer._outside.append((EVALUATION, self.eval_start, end))
            self.eval_start = self.eval_end = None

    def _close(self, end=None):
        self.timer.step_done(end)
        self.opened, self.bwd_end = False, None

    # -- the end ---------------------------------------------------------------
    def finish(self, reason: str) -> None:
        """Write this rank's result (once, from the process that made the recorder)."""
        if self.finished or os.getpid() != self.pid or self.timer is None:
            return
        self.finished = True
        self._end_eval()
        if self.opened and self.bwd_end is not None:
            self._close(self.bwd_end)
        result = self.timer.result()
        result["doctor"] = {"reason": reason, "optimizer_steps": self.opt_steps, "warmup": self.warmup,
                            "window": self.window, "hook_s": self.hook_s, "hook_calls": self.hook_calls,
                            "notes": self.notes, "pid": self.pid, "knobs": self.knobs,
                            "model": "ddp" if self.models[:1] and self.models[0][1] else "plain"}
        rank = result.get("rank", int(os.environ.get("RANK", 0)))
        path = os.path.join(self.out_dir, f"rank-{rank}.json")
        tmp = f"{path}.{self.pid}.tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, default=str)
        os.replace(tmp, path)
        # Let go of the model (and through DDP, its process group): a script that frees its model before
        # destroy_process_group frees the group there and ends without gloo's threads, as it does alone.
        self.timer = self.model = None
        self.models = []
