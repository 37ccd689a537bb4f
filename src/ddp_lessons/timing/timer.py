"""Per-step timing on every rank: data wait, forward, backward, optimizer step,
the all-reduce, and how much of it was exposed.

Usage inside a worker (notebook 00_first_launch introduces it):

    timer = StepTimer(ddp_model)               # mode "full" on CPUs, "light" on GPUs (below)
    for batch in timer.data(loader):           # times the wait for each batch
        with timer.phase("forward"):  loss = loss_fn(ddp_model(batch))
        with timer.phase("backward"): loss.backward()
        with timer.phase("optimizer"): opt.step(); opt.zero_grad()
        timer.step_done()                      # (the last four lines: timer.finish_step(loss, opt))
    times = timer.result()                     # plain dict, one entry per step

Clocks: the host's `perf_counter` on CPUs. On GPUs a CUDA event is recorded at
every mark instead, from a ring of events allocated once (`timing.clocks`);
events are read only when the ring is full (its older half, long completed)
and at `result()`, which synchronises once: a host clock around
`loss.backward()` measures only how fast the host queued the kernels, and
reading an event every step would stall the queue. The data wait is always a
host time (the host is what waits for the loader).

Two ways to get the all-reduce (`mode=`):

- "full" (the default on CPUs, and with `hook=`): a DDP communication hook that wraps the hook
  doing the sending (`hook=`, default torch's `allreduce_hook`, what DDP does
  by itself; compression and injected delays are such hooks, in `hooks`)
  times every bucket, from the moment DDP hands it over (its gradients are
  ready) to the moment the inner hook's future has completed (its callback;
  on NCCL an event recorded there completes after the collective). Exposed
  communication runs from the last bucket becoming ready (backward compute
  done) to the last all-reduce completing: what the backward pass could not
  hide. Any Python hook costs time on a GPU step of a few ms (~7% measured on
  one H200 at 2 ms), timed or not.
- "light" (the default for a DDP model on a GPU without `hook=`): DDP keeps
  its own C++ all-reduce (or the `hook=` given, registered as it is; without
  the flight recorder the bytes are then the gradients') and the timer reads,
  on NCCL, the flight recorder's per-collective GPU durations, elsewhere (or
  with `ddp_logging=True`) DDP's own per-iteration timings (`timing.light`
  says how). Per step: the all-reduce's time (`allreduce`: the flight
  recorder's kernel time where it has one, else DDP's span from the first
  bucket handed over to the last all-reduce waited for, also kept as
  `allreduce_span`), `exposed` (from DDP's timings only), calls and bytes; per collective `bucket_durations`; `buckets` stays empty (no bucket
  is placed on the step's time axis). `result()["comm_source"]` names where
  the numbers came from.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ..hooks import allreduce_hook
from . import light
from .clocks import HostClock, cuda_clock
from .comm import _apply_light, _comm_numbers, _register, timed_comm_hook

__all__ = ["StepTimer", "median_step", "ddp_logging_times", "timed_comm_hook", "MODES"]

MODES = ("full", "light")


class _Phase:
    """`with timer.phase(name):` without a generator per call."""
    __slots__ = ("timer", "name", "start")

    def __init__(self, timer, name):
        self.timer, self.name = timer, name

    def __enter__(self):
        self.start = self.timer.clock.mark()

    def __exit__(self, *exc):
        self.timer._cur["phases"][self.name] = (self.start, self.timer.clock.mark())
        return False


class _Off:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_OFF = _Off()


class StepTimer:
    """Records one rank's per-step timings. See the module docstring.

    `ddp_model`: a DistributedDataParallel model whose all-reduce to time
    (None: no all-reduce timing, e.g. a single-process baseline).
    `hook`, `state`: the communication hook that sends the gradients and its
    state (e.g. `hooks.compression_hook("bf16")`, or a hook of your own;
    None: DDP's own all-reduce). The timer registers it on `ddp_model`,
    wrapped in mode "full", as it is otherwise: what is sent never depends on
    timing. The hook goes to the timer, not to the model, because DDP takes
    one hook per model; a model that already has one raises an error saying
    to pass it here instead.
    `mode`: "full" or "light" (module docstring); None picks "light" for a
    DDP model on a GPU that keeps DDP's own all-reduce (`hook=None`), and
    "full" otherwise: a Python hook costs what it costs anyway, and wrapped
    it reports the bytes it really sends. In "light", `ddp_logging=True`
    adds DDP's timings (the all-reduce's span and the exposed part; a read per
    step, and on CUDA a wait on the previous step's events), `False` leaves
    them out (no exposed time); None, the default, adds them only where the
    flight recorder is not there (not NCCL). `flight_recorder=False` skips
    the flight recorder (which turns on timing of the model's process
    group's collectives).
    `enabled=False` turns every mark into a no-op: the same training loop then
    runs uninstrumented (the overhead benchmark).
    `time_comm=False` times the phases only.
    `comm_hook()` is the (state, hook) pair to register elsewhere (Lightning).
    """

    def __init__(self, ddp_model=None, device=None, enabled=True, hook=None, state=None,
                 time_comm=True, mode=None, ddp_logging=None, flight_recorder=True,
                 ring_size=4096):
        self.enabled = enabled
        device = torch.device(device) if device is not None else _model_device(ddp_model)
        self.device = device
        self.mode = mode or ("light" if device.type == "cuda" and ddp_model is not None and hook is None
                             else "full")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES} or None, not {mode!r}")
        self.clock = cuda_clock(device, ring_size) if device.type == "cuda" and enabled else HostClock()
        self.hook, self.state = hook, state
        self._send = hook if hook is not None else allreduce_hook  # what timed_comm_hook calls
        self.times_comm = enabled and time_comm
        self._steps, self._buckets = [], []
        self._ddp = self._fr = None
        if self.mode == "light" and self.times_comm and ddp_model is not None:
            if flight_recorder and _is_nccl(ddp_model) and light.flight_recorder_available():
                self._fr = light.FlightRecorderSource(ddp_model.process_group)
            # DDP's timings cost a host wait on CUDA events every step (+25% on a 2 ms
            # H200 step, data/runs/timer-validation-h200x1): by default only where the
            # flight recorder is not there to give the all-reduce's time instead.
            use_ddp = self._fr is None if ddp_logging is None else ddp_logging
            self._ddp = light.DDPLogging(ddp_model) if use_ddp else None
        self._new_step()
        state, hook = self.comm_hook()
        if ddp_model is not None and hook is not None:
            _register(ddp_model, state, hook)

    def comm_hook(self):
        """(state, hook) to register on the DDP model: the timing hook around
        the given hook (mode "full"), the given hook alone otherwise, or (None, None)."""
        if self.times_comm and self.mode == "full":
            return self, timed_comm_hook
        return self.state, self.hook

    # -- marks ---------------------------------------------------------------
    def _new_step(self):
        self._cur = {"start": self.clock.mark() if self.enabled else None,
                     "phases": {}, "data": 0.0}
        self._buckets = []

    def phase(self, name: str):
        """Time the enclosed block as phase `name` of the current step."""
        return _Phase(self, name) if self.enabled else _OFF

    def data(self, iterable):
        """Iterate like `iterable`, timing each wait for the next batch (host time)."""
        it = iter(iterable)
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                return
            if self.enabled:
                self._cur["data"] += time.perf_counter() - t0
            yield batch

    def _bucket_done(self, index, ready, done, sent_bytes, grad_bytes):
        self._buckets.append((index, ready, done, sent_bytes, grad_bytes))

    def finish_step(self, loss, optimizer):
        """The rest of a plain training step, timed: backward, optimizer step
        (gradients set to None), then `step_done`."""
        with self.phase("backward"):
            loss.backward()
        with self.phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        self.step_done()

    def step_done(self):
        """Close the current step (call once per optimizer step or micro-step)."""
        if not self.enabled:
            return
        self._cur["end"] = self.clock.mark()
        self._cur["buckets"] = sorted(self._buckets, key=lambda b: b[0])
        self._steps.append(self._cur)
        if self._ddp is not None:
            self._ddp.read(len(self._steps) - 1)
        if self._fr is not None:
            self._fr.step_done()
        self._new_step()

    # -- results -------------------------------------------------------------
    def result(self) -> dict:
        """Every finished step as plain numbers (seconds, bytes); JSON-ready."""
        marks = []
        for s in self._steps:
            marks += [s["start"], s["end"]]
            for a, b in s["phases"].values():
                marks += [a, b]
            for _, ready, done, *_ in s["buckets"]:
                marks += [ready, done]
        values = iter(self.clock.seconds(marks))
        steps = [self._step_numbers(i, s, values) for i, s in enumerate(self._steps)]
        out = {"rank": dist.get_rank() if dist.is_initialized() else 0,
               "device": str(self.device), "mode": self.mode, "steps": steps}
        if self._ddp is not None or self._fr is not None:
            out["comm_source"] = self._light_numbers(steps)
        else:
            out["comm_source"] = "hook" if self.times_comm and self.mode == "full" else "none"
        if self._fr is not None:
            out["flight_recorder"] = self._fr.info
        return out

    def _step_numbers(self, i, s, values):
        start, end = next(values), next(values)
        phases = {k: (next(values) - start, next(values) - start) for k in s["phases"]}
        buckets = [{"index": idx, "start": next(values) - start, "end": next(values) - start,
                    "bytes": sent, "grad_bytes": grad}
                   for idx, _, _, sent, grad in s["buckets"]]
        out = {"step": i, "step_time": end - start, "data": s["data"],
               "phases": phases, "buckets": buckets}
        out.update({k: b - a for k, (a, b) in phases.items()})
        out.update(_comm_numbers(buckets, phases.get("backward")))
        return out

    def _light_numbers(self, steps) -> str:
        """Put DDP's and the flight recorder's numbers into `steps`; name the source."""
        if self._ddp is not None:
            self._ddp.finish(len(steps) - 1)
        ddp = self._ddp.per_step() if self._ddp is not None else {}
        sync = (lambda: torch.cuda.synchronize(self.device)) if self.device.type == "cuda" else None
        fr = self._fr.collect(sync) if self._fr is not None else {}
        timed = {k for k, v in fr.items() if v and all(b["duration"] is not None for b in v)}
        for s in steps:
            _apply_light(s, ddp.get(s["step"]), fr.get(s["step"]), s["step"] in timed,
                         has_exposed=self._ddp is not None)
        parts = (["ddp_logging"] if ddp else []) + (["flight_recorder"] if timed else [])
        return "+".join(parts) or "none"


def _model_device(model):
    if model is None:
        return torch.device("cpu")
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def _is_nccl(ddp_model) -> bool:
    try:
        return dist.get_backend(ddp_model.process_group) == "nccl"
    except Exception:  # noqa: BLE001 - no process group on the model
        return False


def median_step(times: dict, skip: int = 2) -> dict:
    """Median of every per-step number of one rank, leaving out the first `skip`
    steps (DDP rebuilds its buckets after the first iteration; warm-up).

    Every key any kept step has, each over the steps that have it; {} for a
    rank without steps."""
    import statistics
    steps = times["steps"][skip:] or times["steps"]
    keys = dict.fromkeys(k for s in steps for k, v in s.items()
                         if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool))
    return {k: statistics.median(v for s in steps if isinstance(v := s.get(k), (int, float)))
            for k in keys}


def ddp_logging_times(ddp_model) -> dict:
    """DDP's own per-iteration timings (seconds), from its private logging data.

    Call `ddp_model._set_ddp_runtime_logging_sample_rate(1)` right after
    wrapping to sample every step. DDP reports step k at the start of step k+1.
    Exposed = backward_comm_time - backward_compute_comm_overlap_time.
    """
    data = ddp_model._get_ddp_logging_data()
    ns = {k: data.get(k, 0) / 1e9 for k in ("forward_compute_time", "backward_compute_time",
                                             "backward_comm_time", "backward_compute_comm_overlap_time")}
    ns["exposed"] = ns["backward_comm_time"] - ns["backward_compute_comm_overlap_time"]
    return ns
