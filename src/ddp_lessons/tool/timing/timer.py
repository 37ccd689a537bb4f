"""Per-step timing on every rank, and an account of all of the rank's time.

`StepTimer` records data wait, forward, backward, optimizer step and the all-reduce per step (how much
of it was exposed, and how much of that was waiting for a slower rank), named work outside the steps,
and the remainder; `result()` returns it all as a JSON-ready dict. Notebook 00_first_launch introduces
it; the `StepTimer` docstring shows the usage and the two ways of timing the all-reduce ("full",
"light"). Clocks: `timing.clocks`; one time axis for all ranks: `timing.sync`; DDP's and NCCL's own
timings: `timing.light`; the account: `timing.account`.
"""

from __future__ import annotations

import time

import torch

from ..hooks import allreduce_hook
from . import light
from .account import account, run_info, startup_since
from .clocks import HostClock, cuda_clock
from .comm import _register, light_numbers, timed_comm_hook
from .marks import OFF, Outside, Phase, step_numbers
from .reading import ddp_logging_times, median_step
from .sync import CommonClock, ready_time

__all__ = ["StepTimer", "median_step", "ddp_logging_times", "timed_comm_hook", "MODES"]

MODES = ("full", "light")
# DDP's timings on a GPU: one step in 10 (and DDP's own first 10). Reading them every step cost +4.5% of
# case 2's 2 ms H200 step over the flight recorder alone (timer-validation-h200x1: light_ddp against
# light), most of it DDP's wait on its CUDA events; a sample of every 10th step costs a tenth of that.
DDP_SAMPLE_CUDA = 10


class StepTimer:
    """Records one rank's per-step timings and the rest of its time.

    Usage inside a worker:
        timer = StepTimer(ddp_model, batch_size=32)  # every rank creates one (a barrier, below)
        for epoch in range(epochs):
            for batch in timer.data(loader):         # times the wait for each batch
                with timer.phase("forward"):  loss = loss_fn(ddp_model(batch))
                with timer.phase("backward"): loss.backward()
                with timer.phase("optimizer"): opt.step(); opt.zero_grad()
                timer.step_done()                    # (the last four lines: timer.finish_step(loss, opt))
            with timer.outside("eval"):              # work between steps, timed as such
                evaluate()
        times = timer.result()                       # every rank calls it; a plain, JSON-ready dict

    A step starts at its own first mark (the start of the wait for its batch in `timer.data`, else its
    first phase) and ends at `step_done()`; work between steps goes in `timer.outside(name)`.
    With several ranks the timer takes a common reference at a barrier when it is created and again in
    `result()` (`timing.sync`): both are collectives, so every rank creates the timer and calls `result()`.

    `ddp_model`: a DistributedDataParallel model whose all-reduce to time
    (None: no all-reduce timing, e.g. a single-process baseline).
    `hook`, `state`: the communication hook that sends the gradients and its
    state (e.g. `hooks.compression_hook("bf16")`, or a hook of your own;
    None: DDP's own all-reduce). The timer registers it on `ddp_model`,
    wrapped in mode "full", as it is otherwise: what is sent never depends on
    timing. DDP takes one hook per model: a model that already has one raises
    an error saying to pass it here instead.
    `batch_size`: samples per step on this rank (optional; kept in the result
    so throughput can be computed from it).
    `mode`: how the all-reduce is timed. "full": a DDP communication hook that wraps the hook doing the
    sending (`hook=`, default torch's `allreduce_hook`) times every bucket, from the moment DDP hands it
    over to the moment the inner hook's future has completed (on NCCL an event recorded in its callback);
    exposed: from the last bucket becoming ready (backward compute done) to the last all-reduce completing.
    "light": DDP keeps its own C++ all-reduce and the timer reads DDP's own per-iteration timings
    (`allreduce_span`, `exposed`, and from them `wait`) and, on NCCL, the flight recorder (calls, bytes,
    `bucket_durations`; `timing.light`); `result()["comm_source"]` names the sources. None picks "light"
    for a DDP model on a GPU that keeps DDP's own all-reduce (`hook=None`), and "full" otherwise.
    `ddp_logging`: None reads DDP's timings every `DDP_SAMPLE_CUDA`-th step on a GPU (DDP then waits on
    its CUDA events on those steps only; `result()["ddp_logging"]` says which steps have them, and
    `diagnose` scales them to every step), every step elsewhere; True every step; an int k every k-th
    step (and DDP's first 10); False never (no
    `exposed`, no `wait`: `diagnose` says so). `flight_recorder=False` leaves NCCL's recorder alone.
    `enabled=False` turns every mark into a no-op (and takes no common
    reference): the same loop then runs uninstrumented.
    `group`: the ranks whose clocks are put on one axis (a barrier and a
    gather at creation and in `result()`, over this group only) and whose
    rank and size the result reports; None: the DDP model's process group,
    else every rank. Create the timer on the group's members only.
    `run_start`: where this run began, for the account's `startup`:
    "process" (the process's start: a launched worker), a
    `time.perf_counter()` reading taken where the run began (several runs in
    one process: the earlier runs are not this one's start-up), or None.
    `time_comm=False` times the phases only.
    `comm_hook()` is the (state, hook) pair to register elsewhere (Lightning).
    """

    def __init__(self, ddp_model=None, device=None, enabled=True, hook=None, state=None,
                 time_comm=True, mode=None, ddp_logging=None, flight_recorder=True,
                 ring_size=4096, batch_size=None, group=None, run_start="process"):
        startup = startup_since(run_start)  # a bad value is refused before anything is registered
        self.enabled, self.batch_size = enabled, batch_size
        self.group = group if group is not None else getattr(ddp_model, "process_group", None)
        device = torch.device(device) if device is not None else _model_device(ddp_model)
        self.device = device
        # "light" on GPUs: any Python hook, timed or not, costs time on a GPU step of a few ms (torch's own
        # allreduce_hook alone +12.6% median on one H200 at 2 ms, 5 rounds: timer-validation-h200x1)
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
        self.times_comm = enabled and time_comm
        self._steps, self._buckets, self._outside = [], [], []
        self._outside_depth = self._unfinished = 0
        self._ddp = self._fr = None
        self._epochs, self._pass_starts = 0, []  # passes of timer.data over a loader, and their first steps
        light_comm = self.mode == "light" and self.times_comm and ddp_model is not None
        if light_comm and ddp_logging is not False:
            every = (ddp_logging if type(ddp_logging) is int and ddp_logging > 0 else
                     1 if ddp_logging is True or device.type != "cuda" else DDP_SAMPLE_CUDA)
            self._ddp = light.DDPLogging(ddp_model, sample_every=every)
        self._new_step()
        state, hook = self.comm_hook()
        if ddp_model is not None and hook is not None:
            _register(ddp_model, state, hook)
        self._startup = startup
        self._sync = CommonClock(self.clock, device, enabled, self.group)  # the barrier every member passes
        # after that barrier: the recorder keeps the collectives created from here on, not the barrier's
        if light_comm and flight_recorder and light.is_nccl(ddp_model) and light.flight_recorder_available():
            self._fr = light.FlightRecorderSource(ddp_model.process_group)

    def comm_hook(self):
        """(state, hook) to register on the DDP model: the timing hook around
        the given hook (mode "full"), the given hook alone otherwise, or (None, None)."""
        if self.times_comm and self.mode == "full":
            return self, timed_comm_hook
        return self.state, self.hook

    # -- marks ---------------------------------------------------------------
    def _new_step(self):
        self._cur = {"start": None, "phases": {}, "data": 0.0}  # opened by its first mark
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

    def phase(self, name: str):
        """Time the enclosed block as phase `name` of the current step (opening it if none is open).
        Between steps it opens a step too: without `timer.data` the timer cannot tell it from the next
        step's first phase, so time work between steps with `outside`."""
        return Phase(self, name) if self.enabled and not self._outside_depth else OFF

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

    def data(self, iterable):
        """Iterate like `iterable`, timing each wait for the next batch (always host time: the host
        waits for the loader).
        The wait opens the step the batch is for; inside `outside()` it is not timed."""
        it = None
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

    def _bucket_done(self, index, ready, done, sent_bytes, grad_bytes):
        self._buckets.append((index, ready, done, sent_bytes, grad_bytes))

    def finish_step(self, loss, optimizer):
        """The rest of a plain training step, timed: backward, optimizer step
        (gradients set to None), then `step_done`. Three marks, not five: the backward's end is
        the optimizer's start and the optimizer's end is the step's (nothing runs between them),
        which saves two event records a step on a GPU (about 11 us of host time on an H200)."""
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

    def step_done(self, end=None):
        """Close the current step (call once per optimizer step or micro-step)."""
        if not self.enabled:
            return
        self._cur["end"] = self.clock.mark() if end is None else end
        self._cur["buckets"] = sorted(self._buckets, key=lambda b: b[0])
        self._steps.append(self._cur)
        if self._ddp is not None:
            self._ddp.read(len(self._steps) - 1)
        if self._fr is not None:
            self._fr.step_done()
        self._new_step()

    # -- results -------------------------------------------------------------
    def result(self) -> dict:
        """Every finished step, the work outside the steps and the account of the
        rank's time, as plain numbers (seconds, bytes); JSON-ready; `account` adds it up
        (`timing.account`): wall = steps + outside + unattributed. A collective
        when the timer took a common reference: every rank calls it."""
        out = run_info(self.device, self.mode, self.batch_size, self.group)
        if not self.enabled:
            return out | {"steps": [], "outside": [], "comm_source": "none"}
        self._close_unfinished()
        t_end, end = self._sync.point()
        marks = [self._sync.ref, end]
        for s in self._steps:
            marks += [s["start"] if s["start"] is not None else s["end"], s["end"]]
            for a, b in s["phases"].values():
                marks += [a, b]
            for _, ready, done, *_ in s["buckets"]:
                marks += [ready, done]
        for _, a, b in self._outside:
            marks += [a, b]
        values = iter(self.clock.seconds(marks))
        origin = next(values)
        wall = next(values) - origin
        steps = [step_numbers(i, s, values, origin) for i, s in enumerate(self._steps)]
        outside = [{"name": n, "start": next(values) - origin, "end": next(values) - origin}
                   for n, _, _ in self._outside]
        if self._ddp is not None or self._fr is not None:
            out["comm_source"] = self._light_numbers(steps)
        else:
            out["comm_source"] = "hook" if self.times_comm and self.mode == "full" else "none"
        if self._fr is not None:
            out["flight_recorder"] = self._fr.info
        if self._ddp is not None:
            out["ddp_logging"] = {"sample_every": self._ddp.sample_every,
                                  "steps_with_exposed": sum("exposed" in s for s in steps)}
        out["data_passes"], out["pass_starts"] = self._epochs, list(self._pass_starts)
        clock, waits = self._sync.finish(wall, t_end, [ready_time(s) for s in steps])
        for s, w in zip(steps, waits, strict=True):
            if w is not None:  # the part of `exposed` spent waiting for the slowest rank
                s["wait"] = min(max(0.0, w), s.get("exposed", 0.0))
        clock["wait_source"] = "buckets" if self.mode == "full" else "backward end - exposed"
        out.update(steps=steps, outside=outside, clock=clock, unfinished_steps=self._unfinished,
                   account=account(wall, steps, outside, self._startup))
        return out

    def _light_numbers(self, steps) -> str:
        """Put DDP's and the flight recorder's numbers into `steps`; name the source."""
        return light_numbers(steps, self._ddp, self._fr, self.device)


def _model_device(model):
    if model is None:
        return torch.device("cpu")
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")
