"""Per-step timing on every rank, and an account of all of the rank's time.

`StepTimer` records data wait, forward, backward, optimizer step and the all-reduce per step (how much
of it was exposed, and how much of that was waiting for a slower rank), which steps were optimizer steps
and which micro-steps (torch's own optimizer and forward hooks), named work outside the steps, and the
remainder; `result()` returns it all as a JSON-ready dict. Notebook 00_first_launch introduces it; the
`StepTimer` docstring shows the usage. Clocks: `timing.clocks`; one time axis: `timing.sync`; DDP's and
NCCL's own timings: `timing.light`; the account: `timing.account`; what it sees of the run: `timing.context`.
"""

from __future__ import annotations

import torch

from ..hooks import allreduce_hook
from . import context, light
from .account import account, run_info, startup_since
from .clocks import HostClock, cuda_clock
from .comm import HookState, _register, light_numbers, timed_comm_hook
from .marks import step_marks, step_numbers
from .steps import StepMarks
from .sync import CommonClock, ready_time

__all__ = ["StepTimer", "timed_comm_hook", "MODES"]

MODES = ("full", "light")
# DDP's own timings are not read on a GPU unless asked (ddp_logging=True or k): DDP waits on its CUDA
# events of the step before when it records them (a host-device sync in the step; read every step they
# cost case 2's 3 ms H200 step +11.1% median, timer-cost-h200x1). The backward's compute end comes from an
# autograd callback instead (`timing.compute_end`), on every step, with no sync.
KIND = "ddp-lessons/step-timer"   # marks a result as the timer's, whatever else a worker returns


class StepTimer(StepMarks):
    """Records one rank's per-step timings and the rest of its time.

    Usage inside a worker:
        timer = StepTimer(ddp_model, batch_size=32)  # every rank creates one (a barrier, below)
        for epoch in range(epochs):
            for batch in timer.data(loader):         # times the wait for each batch
                with timer.phase("forward"):  loss = loss_fn(ddp_model(batch))
                timer.finish_step(loss, opt)         # backward, opt.step(), opt.zero_grad(), step_done()
            with timer.outside("eval"):              # work between steps, timed as such
                evaluate()
        times = timer.result()                       # every rank calls it; a plain, JSON-ready dict

    A step is one forward and backward: with gradient accumulation each micro-step is a step (call
    `step_done()` after each). The timer tells optimizer steps from micro-steps by itself (torch's global
    optimizer step hook: an `opt.step()` anywhere between a step's first mark and the next step's belongs
    to that step) and sees, at each forward of the DDP model, whether its backward will all-reduce
    (`no_sync()` or `require_backward_grad_sync`). A step starts at its own first mark (the wait for its
    batch in `timer.data`, else its first phase) and ends at `step_done()`; work between steps goes in
    `timer.outside(name)`; a batch fetched in the middle of a step is timed with `timer.data_wait()`.
    With several ranks the timer takes a common reference at a barrier when it is created and again in
    `result()` (`timing.sync`): both are collectives, so every rank creates the timer and calls `result()`.

    `model`: the DistributedDataParallel model whose all-reduce to time, or a plain module (a
    1-process baseline: phases only), or None.
    `hook`, `state`: the communication hook that sends the gradients and its state (e.g.
    `hooks.compression_hook("bf16")`; None: DDP's own all-reduce). The timer registers it on the model,
    wrapped in mode "full": what is sent never depends on timing. A model that already has a hook raises
    an error saying to pass it here instead.
    `batch_size`: samples per step on this rank (kept in the result for throughput).
    `mode`: how the all-reduce is timed. "full": a DDP communication hook wraps the hook that sends
    (default torch's `allreduce_hook`) and times every bucket, from DDP handing it over to its future's
    completion (on NCCL an event recorded in its callback); exposed: from the last bucket becoming ready
    to the last all-reduce completing. "light": DDP keeps its own C++ all-reduce and the timer reads DDP's
    own per-iteration timings and, on NCCL, the flight recorder (`timing.light`). None: "light" for a DDP
    model on a GPU with `hook=None`, "full" otherwise. `result()["comm_source"]` names the sources.
    In mode "light" each all-reducing step's backward is split at its compute's end, marked from an
    autograd callback (`timing.compute_end`): `exposed` and the wait for a slower rank on every step.
    `ddp_logging`: also read DDP's own timings (`allreduce_span`; a cross-check of `exposed`): None every
    step on CPUs and never on a GPU (on a GPU DDP waits on its events to record them); True every step;
    an int k every k-th step; False never.
    `flight_recorder`: on NCCL, read the all-reduces' calls and bytes from its flight recorder (True), and
    their durations too ("timing": CUDA events around every collective of the group, a change to the
    user's group the default does not make); False leaves NCCL's recorder alone. `enabled=False` turns every
    mark into a no-op.
    `group`: the ranks whose clocks are put on one axis (None: the model's process group, else every
    rank). `collectives=False`: no barrier or gather at creation or in `result()` (the waits are then
    worked out afterwards from every rank's result, on one host's clock: `Run`).
    `run_start`: where this run began, for the account's `startup`: "process" (the process's start), a
    `time.perf_counter()` reading, or None. `time_comm=False` times the phases only.
    `comm_hook()` is the (state, hook) pair to register elsewhere (Lightning). `watch_model=False`: no hooks
    on the model; the caller reports its forwards (`forward_began`, `arm_compute_end`: the doctor).
    """

    def __init__(self, model=None, device=None, enabled=True, hook=None, state=None,
                 time_comm=True, mode=None, ddp_logging=None, flight_recorder=True,
                 ring_size=4096, batch_size=None, group=None, run_start="process", collectives=True,
                 watch_model=True):
        startup = startup_since(run_start)  # a bad value is refused before anything is registered
        ddp = context.is_ddp(model)
        self.model = model
        ddp_model = model if ddp else None
        self.enabled, self.batch_size = enabled, batch_size
        self.group = group if group is not None else getattr(ddp_model, "process_group", None)
        device = torch.device(device) if device is not None else _model_device(model)
        self.device = device
        # "light" on GPUs: any Python hook, timed or not, costs time on a GPU step of a few ms (torch's own
        # allreduce_hook alone +12.6% median on one H200 at 2.4 ms, 5 rounds: timer-validation-h200x1)
        self.mode = mode or ("light" if device.type == "cuda" and ddp_model is not None and hook is None
                             else "full")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES} or None, not {mode!r}")
        # CPU: the host's perf_counter; GPU: a CUDA event per mark, from a ring allocated once, read when the
        # ring is full and at result()
        self.clock = cuda_clock(device, ring_size) if device.type == "cuda" and enabled else HostClock()
        # torch's allreduce_hook with state None sums over every rank: give it the timer's group
        self.hook, self.state = hook, state if state is not None or hook is not None else self.group
        self._send = hook if hook is not None else allreduce_hook  # what timed_comm_hook calls
        self.times_comm = enabled and time_comm and (ddp_model is not None or model is None)
        self._steps, self._buckets, self._outside = [], [], []
        self.sending = False                     # the timing hook is handing a bucket to its inner hook
        self._outside_depth = self._unfinished = 0
        self._ddp = self._fr = self._loader = self._tensor_step = self._hook_state = None
        self._tensor_rows = {}                   # bytes of each tensor per bucket, from one step (mode "full")
        self._handles = []
        self._epochs, self._pass_starts = 0, []  # passes of timer.data over a loader, and their first steps
        light_comm = self._light = self.mode == "light" and self.times_comm and ddp_model is not None
        if light_comm and ddp_logging is not False and (ddp_logging is not None or device.type != "cuda"):
            every = ddp_logging if type(ddp_logging) is int and ddp_logging > 0 else 1
            self._ddp = light.DDPLogging(ddp_model, sample_every=every)
        self._new_step()
        state, hook = self.comm_hook()
        if ddp_model is not None and hook is not None:
            _register(ddp_model, state, hook)
        if enabled:
            context.watch(self)
            if ddp_model is not None and watch_model:
                self._handles += context.watch_forwards(self, ddp_model, compute_end=light_comm)
        self._startup = startup
        # the barrier every member passes (none with collectives=False)
        self._sync = CommonClock(self.clock, device, enabled, self.group, collective=collectives)
        # after that barrier: the recorder keeps the collectives created from here on, not the barrier's
        if light_comm and flight_recorder and light.is_nccl(ddp_model) and light.flight_recorder_available():
            self._fr = light.FlightRecorderSource(ddp_model.process_group, enable_timing=flight_recorder == "timing")

    def comm_hook(self):
        """(state, hook) to register on the DDP model: the timing hook around
        the given hook (mode "full"), the given hook alone otherwise, or (None, None)."""
        if self.times_comm and self.mode == "full":
            self._hook_state = HookState(self)
            return self._hook_state, timed_comm_hook
        return self.state, self.hook

    def _wrap(self, hook, state) -> None:
        """Send with `hook` and `state` (a hook the script registers after the timer, mode "full")."""
        self.hook, self.state, self._send = hook, state, hook
        if self._hook_state is not None:
            self._hook_state.send, self._hook_state.state = hook, state

    def finish_step(self, loss, optimizer):
        """The rest of a plain training step, timed: `loss.backward()`, `optimizer.step()`,
        `optimizer.zero_grad(set_to_none=True)`, then `step_done()`. Three marks, not five: the
        backward's end is the optimizer's start and the optimizer's end is the step's (nothing runs
        between them), which saves two event records a step on a GPU (about 11 us of host time on an H200)."""
        if not self.enabled or self._outside_depth:
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return self.step_done()
        with self.phase("backward"):  # refuses a second backward in the step, as a phase does
            loss.backward()
        b_end = self._cur["phases"]["backward"][1]
        if "optimizer" in self._cur["phases"]:
            raise ValueError("phase 'optimizer' entered twice in one step: call timer.step_done() after "
                             "each step")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        end = self.clock.mark()
        self._cur["phases"]["optimizer"] = (b_end, end)
        self.step_done(end)

    # -- results -------------------------------------------------------------
    def result(self) -> dict:
        """Every finished step, the work outside the steps and the account of the
        rank's time, as plain numbers (seconds, bytes); JSON-ready; `account` adds it up
        (`timing.account`): wall = steps + outside + unattributed. A collective
        when the timer took a common reference: every rank calls it."""
        context.unwatch(self)
        for h in self._handles:
            h.remove()
        self._handles = []
        self._drop_end_marker()
        out = run_info(self.device, self.mode, self.batch_size, self.group)
        out["kind"] = KIND
        if not self.enabled:
            return out | {"steps": [], "outside": [], "comm_source": "none"}
        self._close_unfinished()
        t_end, end = self._sync.point()
        marks = [self._sync.ref, end]
        for s in self._steps:
            marks += step_marks(s)
        for _, a, b in self._outside:
            marks += [a, b]
        host = getattr(self.clock, "host_seconds", None)
        values = iter(self.clock.seconds(marks))
        origin = next(values)
        wall = next(values) - origin
        host_ref = host(self._sync.ref) if host is not None else None
        steps = [step_numbers(i, s, values, origin, host, host_ref) for i, s in enumerate(self._steps)]
        outside = [{"name": n, "start": next(values) - origin, "end": next(values) - origin}
                   for n, _, _ in self._outside]
        if self._light:
            out["comm_source"] = light_numbers(steps, self._ddp, self._fr, self.device, self.model)
        else:
            out["comm_source"] = "hook" if self.times_comm and self.mode == "full" else "none"
        if self._fr is not None:
            out["flight_recorder"] = self._fr.info
        if self._ddp is not None:
            out["ddp_logging"] = {"sample_every": self._ddp.sample_every,
                                  "steps_read": sum("ddp_exposed" in s for s in steps)}
        out["data_passes"], out["pass_starts"] = self._epochs, list(self._pass_starts)
        for s in steps:  # this rank's backward compute's end on its own axis (seconds since its reference)
            s["ready"] = ready_time(s)
        clock, waits = self._sync.finish(wall, t_end, [s["ready"] for s in steps])
        for s, w in zip(steps, waits, strict=True):
            if w is not None:  # the part of `exposed` spent waiting for the slowest rank
                s["wait"] = min(max(0.0, w), s.get("exposed", 0.0))
        clock["wait_source"] = ("buckets" if self.mode == "full" else "compute end" if
                                any("computed" in s for s in steps) else "backward end - exposed")
        clock["kind"] = "cuda events" if host is not None else "host"
        out["model"] = self._model_info()
        out["loader"] = self._loader
        out.update(steps=steps, outside=outside, clock=clock, unfinished_steps=self._unfinished,
                   account=account(wall, steps, outside, self._startup))
        return out

    def _model_info(self) -> dict:
        ddp = context.is_ddp(self.model)
        info = context.model_info(self.model, ddp)
        if ddp:
            rows = self._tensor_rows
            tensors = [rows[i] for i in sorted(rows)] if rows else context.buckets_on_cpu(self.model)
            if tensors:
                info["bucket_tensors"] = tensors
        return info


def _model_device(model):
    if model is None:
        return torch.device("cpu")
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")
