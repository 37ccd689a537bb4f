"""One rank's recorder: what torch's hooks report (forwards, `autograd.backward`, optimizer steps, the
loader's batches and start, `torch.save`, the script's collectives) becomes a `StepTimer`'s steps through
its public event methods; the result is written when the script ends (`wire.write_rank`).

A micro-step opens at the wait for its batch (or its forward with gradients) and closes at its optimizer
step, else at its backward's end once the next batch, forward or evaluation begins. Forwards without
gradients between steps are evaluation; checkpoints, a loader's start and collectives between steps are
named apart. One mark serves where nothing runs between two points (a forward's end is its backward's
start). With --steps on a GPU, a few steps after the window are profiled for the GPU's busy share.
"""

from __future__ import annotations

import os
import time
from typing import Any

EVALUATION = "evaluation (forwards without gradients)"
CHECKPOINT = "checkpoint (torch.save)"
LOADER_START = "loader workers starting and stopping (at each pass over a loader)"
COLLECTIVES = "collectives between steps, the script's or a library's"
RING = 16384     # CUDA events allocated at the start, read at the end: a run of 2,700 steps reads none before
REUSE_S = 5e-5   # a step's start shares the last step's end mark where the host went on within 50 us


class Recorder:
    EVALUATION, CHECKPOINT, LOADER_START, COLLECTIVES = EVALUATION, CHECKPOINT, LOADER_START, COLLECTIVES
    profile_module: Any = None    # `rank.profile`, set by `inject`

    def __init__(self, settings, wire):
        self.settings, self.wire = settings, wire
        self.inherited: list = []
        self.reset()

    def reset(self) -> None:
        """A fresh recorder for this process (also in a forked child: nothing of the parent's is timed;
        what the parent's held is kept, not freed, since a forked child must not free CUDA objects)."""
        if getattr(self, "timer", None) is not None:
            self.inherited.append((self.timer, self.models))
        self.pid = os.getpid()
        self.timer: Any = None
        self.models: list = []        # (module, is the DDP wrapper) whose forwards are training forwards
        self.opened = False           # a micro-step is open
        self.bwd_end = None           # the open micro-step's backward end (a clock token)
        self.last_close = None        # the token that closed the last step
        self.bwd_name = "backward"
        self.eval_start = self.eval_end = None
        self.depth = 0                # nesting of forwards of our models (DDP calls its module inside)
        self.in_collective = 0
        # a loader's start: its tokens (iterated, its first batch waited for, arrived) until its batch's use is known
        self.pending_start: dict | None = None
        self.opt_steps = 0
        self.window: list = [None, None]    # host perf_counter: the measured window's start and end
        self.hook_s, self.hook_calls = 0.0, 0
        self.module_calls = 0         # calls of the models the hooks watch
        self.per_call_s = self.dispatch_s = 0.0   # the hooks' cost they do not count themselves, per call
        self.notes: list[str] = []
        self.finished = self.interrupted = self.exit_now = False
        self.written: str | None = None     # the rank file, once written
        self.device_type = "cpu"
        self.failed: str | None = None
        self.profiler = None
        self.profiled, self.profile_t0 = 0, 0.0
        self.eval_loaders: list = []      # the settings of the loaders whose batches evaluations took
        self.last_loader = None

    # -- the timer -------------------------------------------------------------
    def attach(self, model, ddp: bool) -> None:
        """A DDP model (or, without one, the first model trained) was built: time it (the first one; a
        second DDP model is noted, not timed)."""
        from ddp_lessons.tool.timing import StepTimer
        if self.finished:
            return
        if self.timer is not None:
            self.notes.append("a second DistributedDataParallel model was built: only the first is timed")
            return
        self.timer = StepTimer(model, collectives=False, watch_model=False, ring_size=RING)
        self.device_type = self.timer.device.type
        self.timer.stop_watching_optimizers()   # the recorder tells it of each step, before closing it
        self.models = [(model, True), (model.module, False)] if ddp else [(model, False)]

    @property
    def model(self):
        return self.models[0][0] if self.models else None

    def mark(self):
        return self.timer.mark()

    # -- events ----------------------------------------------------------------
    def forward(self, module, grad: bool) -> None:
        if self.depth or self.timer is None:
            return
        if grad:
            self._end_eval()
            if self.opened and self.bwd_end is not None:   # the next micro-step: close the last one
                self._close(self.bwd_end)
            self._loader_start(training=True)
            self.opened = True
            if module is self.models[0][0] and self.models[0][1]:
                self.timer.forward_began(bool(module.require_backward_grad_sync))
            self.timer.begin("forward")
            self.bwd_name = "backward"
            return
        if self.opened and self.bwd_end is not None:
            self._close(self.bwd_end)
        start = self._loader_start(training=False)
        self.last_close = None
        if self.opened:   # a batch waited for, then evaluated: the wait was the evaluation's
            self._eval_loader(self.last_loader)
            dropped = self.timer.drop_open_step()
            start = start if start is not None else dropped
            self.opened = False
        if self.eval_start is None:
            self.eval_start = start if start is not None else self.mark()

    def forward_done(self, module, grad: bool, out) -> None:
        if self.depth or self.timer is None:
            return
        if grad and self.opened and self.timer.mode == "light" and module is self.models[0][0] and \
                self.models[0][1] and module.require_backward_grad_sync:
            self.timer.arm_compute_end(out)
        elif not grad and self.eval_start is not None:
            self.eval_end = self.mark()

    def backward(self, begin: bool) -> None:
        if not self.opened or self.timer is None:
            return
        token = self.mark()
        if begin:
            self.timer.end("forward", token)   # the forward (and the loss) ends where the backward begins
            self.bwd_name = "backward" if self.timer.phase_end("backward") is None else "backward 2"
            self.timer.begin(self.bwd_name, token)
        else:
            self.timer.end(self.bwd_name, token)
            self.bwd_end = token

    def optimizer(self, begin: bool) -> None:
        if self.profiler is not None:   # the steps profiled after the measured window
            if not begin:
                self.profile_module.tick(self)
            return
        if self.timer is None or not self.opened:
            return
        if begin:   # what ran since the backward (clipping, unscaling) is the optimizer step's
            self.timer.begin("optimizer", self.bwd_end)
            return
        end = self.mark()
        self.timer.end("optimizer", end)
        self.timer.optimizer_stepped()
        self._close(end)
        self.opt_steps += 1
        self._window(time.perf_counter())

    def _window(self, now: float) -> None:
        """The measured window: from the warm-up's end to the last optimizer step. With --steps, the run
        ends after it; on a GPU a few more steps are profiled first (`profile`: the GPU's busy share,
        taken after the window so the profiler, whose CUDA callbacks stay on once started, costs none of it)."""
        s, n = self.settings, self.opt_steps
        if n == s.warmup:
            self.window[0] = now
        elif n > s.warmup:
            self.window[1] = now
        if s.steps and n == s.warmup + s.steps:
            self.finish(self.wire.STOPPED)
            if s.profile and self.device_type == "cuda":
                self.profile_module.start_after(self)
            else:
                self.exit_now = True

    def data(self, begin: bool, token=None, loader=None):
        """Around a loader's `next()`: returns the token `begin` made, to hand back at the end."""
        if self.timer is None:
            return None
        p = self.pending_start
        if begin:
            if self.opened and self.bwd_end is not None:
                self._close(self.bwd_end)
            # nothing ran since the last step closed (a tight loop): its end is this step's start, one mark less
            last = self.last_close
            t = last if last is not None and p is None and self.eval_start is None and \
                time.perf_counter() - self.timer.clock.host_time(last) < REUSE_S else self.mark()
            if p is not None and p["loader"] is loader and p["b"] is None:
                p["b"] = t
            return (t, time.perf_counter())
        if p is not None and p["loader"] is loader and p["c"] is None:
            p["c"] = self.mark()   # its first batch is here: the start's end, if an evaluation takes it
        self.last_loader = loader
        if token is None or self.eval_start is not None:
            self._eval_loader(loader)
            return None   # inside an evaluation: its own time
        mark, t0 = token
        self.timer.waited_for_batch(mark, time.perf_counter() - t0, loader)
        self.opened = True
        return None

    def _loader_start(self, training: bool):
        """A pending loader start, now that its batch's use is known. Training: up to the wait for its first
        batch (that wait is the step's data wait, as every other). Evaluation: up to its first batch (the
        evaluation starts there); returns that token."""
        p, self.pending_start = self.pending_start, None
        if p is None:
            return None
        if training or p["c"] is None:
            self.timer.outside_span(LOADER_START, p["a"], p["b"] if p["b"] is not None else self.mark())
            return None
        self.timer.outside_span(LOADER_START, p["a"], p["c"])
        return p["c"]

    def outside(self, name: str, begin: bool, token=None):
        if self.timer is None:
            return None
        if begin:
            if self.opened and self.bwd_end is not None:
                self._close(self.bwd_end)
            self._end_eval()
            return self.mark()
        if token is not None:
            self.timer.outside_span(name, token, self.mark())
        return None

    def collective(self, begin: bool, token=None, name: str = ""):
        """Around a collective the script calls itself (`all_reduce`, a barrier...); named between steps."""
        if self.timer is None or self.timer.sending:   # DDP's own all-reduce, through the timing hook
            return None
        if begin:
            self.in_collective += 1
            return self.mark() if self.in_collective == 1 else None
        self.in_collective -= 1
        if token is None:
            return None
        end = self.mark()
        if self.opened:
            self.timer.collective(token, end)
        elif self.eval_start is None and self.timer.closed_steps:   # evaluation's; before the first step: start-up
            self.timer.outside_span(f"{COLLECTIVES} ({name})" if name else COLLECTIVES, token, end)
        return None

    def _eval_loader(self, loader) -> None:
        if loader is not None and not any(e[0] is loader for e in self.eval_loaders):
            self.eval_loaders.append((loader, self.timer.loader_settings(loader)))

    def _end_eval(self):
        if self.eval_start is not None:
            end = self.eval_end if self.eval_end is not None else self.mark()
            self.timer.outside_span(EVALUATION, self.eval_start, end)
            self.eval_start = self.eval_end = None

    def _close(self, end=None):
        self.timer.step_done(end)
        self.opened, self.bwd_end = False, None
        self.last_close = end

    # -- the end ---------------------------------------------------------------
    def finish(self, reason: str) -> None:
        """Write this rank's result (once, from the process that made the recorder)."""
        if self.finished or os.getpid() != self.pid or self.timer is None:
            return
        self.finished = True
        self._end_eval()
        if self.opened and self.bwd_end is not None:
            self._close(self.bwd_end)
        if self.pending_start is not None and not self.opened:
            self._loader_start(training=True)
        result = self.timer.result()
        if self.interrupted and reason in self.wire.REACHED_END:
            reason = self.wire.INTERRUPTED
        elif self.failed and reason in self.wire.REACHED_END:
            reason = self.failed
        w = self.wire
        untimed = self.hook_calls * self.per_call_s + self.module_calls * self.dispatch_s
        report = w.RankReport(reason, self.opt_steps, self.settings.warmup, self.window, self.hook_s,
                              self.hook_calls, self.notes, self.pid, self.settings.knobs.as_dict(),
                              "ddp" if self.models[:1] and self.models[0][1] else "plain", None,
                              result.get("start_method"), untimed, [info for _, info in self.eval_loaders])
        self.written = w.write_rank(self.settings.out_dir, int(result.get("rank", os.environ.get("RANK", 0))), result,
                                    report)
        # Let go of the model (and through DDP, its process group): a script that frees its model before
        # destroy_process_group frees the group there and ends without gloo's threads, as it does alone.
        self.timer = None
        self.models, self.eval_loaders, self.last_loader = [], [], None
