"""Per-step timing on every rank: data wait, forward, backward, optimizer step,
every gradient bucket's all-reduce, and how much of it was exposed.

Usage inside a worker (notebook 00_first_launch introduces it):

    timer = StepTimer(ddp_model)               # registers a timing comm hook (hook=: around yours)
    for batch in timer.data(loader):           # times the wait for each batch
        with timer.phase("forward"):  loss = loss_fn(ddp_model(batch))
        with timer.phase("backward"): loss.backward()
        with timer.phase("optimizer"): opt.step(); opt.zero_grad()
        timer.step_done()                      # (the last four lines: timer.finish_step(loss, opt))
    times = timer.result()                     # plain dict, one entry per step

Clocks: the host's `perf_counter` on CPUs. On GPUs a CUDA event is recorded at
every mark instead and nothing is read until `result()`, which synchronises
once: a host clock around `loss.backward()` measures only how fast the host
queued the kernels, and reading an event every step would stall the queue.
The data wait is always a host time (the host is what waits for the loader).

The all-reduce is timed inside a DDP communication hook that wraps the hook
doing the sending (`hook=`, default torch's `allreduce_hook`, what DDP does by
itself; compression and injected delays are such hooks, in `hooks`): a
bucket's interval runs from the moment DDP hands it to the hook (its
gradients are ready) to the moment the inner hook's future has completed (its
callback; on NCCL an event recorded there completes after the collective).
Exposed communication is the time from the last bucket becoming ready
(backward compute done) to the last all-reduce completing: the part of the
step the backward pass could not hide.
"""

from __future__ import annotations

import contextlib
import time

import torch
import torch.distributed as dist

from .hooks import allreduce_hook


class _HostClock:
    def mark(self):
        return time.perf_counter()

    def seconds(self, marks):
        return list(marks)


class _CudaClock:
    def __init__(self, device):
        self.device = device
        self.ref = self.mark()

    def mark(self):
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()  # on the current stream; no host-device sync here
        return ev

    def seconds(self, marks):
        # note: CPU-GPU sync point, once per run, in result()
        torch.cuda.synchronize(self.device)
        return [self.ref.elapsed_time(ev) / 1e3 for ev in marks]


def timed_comm_hook(timer: "StepTimer", bucket):
    """DDP communication hook: run the timer's hook on the bucket and time it.

    A plain function because DDP reads the hook's `__name__`, and its second
    parameter must be called `bucket`. Registered by `StepTimer` with the
    timer as state. Bytes sent: the bucket's buffer as the inner hook leaves
    it (torch's compress wrappers, used by `hooks.compression_hook`, swap in
    the cast buffer; a hook that sends a buffer of its own, such as torch's
    PowerSGD, is counted at its gradients' size).
    """
    ready = timer.clock.mark()
    grad_bytes = _nbytes(bucket.buffer())
    fut = timer._send(timer.state, bucket)
    sent_bytes, index = _nbytes(bucket.buffer()), bucket.index()

    def done(f):
        timer._bucket_done(index, ready, timer.clock.mark(), sent_bytes, grad_bytes)
        return f.value()
    return fut.then(done)


def _nbytes(t):
    return t.numel() * t.element_size()


class StepTimer:
    """Records one rank's per-step timings. See the module docstring.

    `ddp_model`: a DistributedDataParallel model whose all-reduce to time
    (None: no all-reduce timing, e.g. a single-process baseline).
    `hook`, `state`: the communication hook that sends the gradients and its
    state (e.g. `hooks.compression_hook("bf16")`, or a hook of your own;
    None: DDP's own all-reduce). The timer registers it on `ddp_model` and
    wraps it when it times the all-reduce, and registers it unwrapped when it
    does not: what is sent never depends on timing. The hook goes to the timer,
    not to the model, because DDP takes one hook per model; a model that
    already has one raises an error saying to pass it here instead.
    `enabled=False` turns every mark into a no-op: the same training loop then
    runs uninstrumented (the overhead benchmark).
    `time_comm=False` times the phases only.
    `comm_hook()` is the (state, hook) pair to register elsewhere (Lightning).
    """

    def __init__(self, ddp_model=None, device=None, enabled=True, hook=None, state=None,
                 time_comm=True):
        self.enabled = enabled
        device = torch.device(device) if device is not None else _model_device(ddp_model)
        self.device = device
        self.clock = _CudaClock(device) if device.type == "cuda" else _HostClock()
        self.hook, self.state = hook, state
        self._send = hook if hook is not None else allreduce_hook  # what timed_comm_hook calls
        self.times_comm = enabled and time_comm
        self._steps, self._buckets = [], []
        self._new_step()
        state, hook = self.comm_hook()
        if ddp_model is not None and hook is not None:
            _register(ddp_model, state, hook)

    def comm_hook(self):
        """(state, hook) to register on the DDP model: the timing hook around
        the given hook, the given hook alone when not timing, or (None, None)."""
        if self.times_comm:
            return self, timed_comm_hook
        return self.state, self.hook

    # -- marks ---------------------------------------------------------------
    def _new_step(self):
        self._cur = {"start": self.clock.mark() if self.enabled else None,
                     "phases": {}, "data": 0.0}
        self._buckets = []

    @contextlib.contextmanager
    def phase(self, name: str):
        """Time the enclosed block as phase `name` of the current step."""
        if not self.enabled:
            yield
            return
        start = self.clock.mark()
        yield
        self._cur["phases"][name] = (start, self.clock.mark())

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
        return {"rank": dist.get_rank() if dist.is_initialized() else 0,
                "device": str(self.device), "steps": steps}

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


def _comm_numbers(buckets, backward):
    """All-reduce busy time (union of bucket intervals), calls, bytes, exposed part."""
    if not buckets:
        return {"allreduce": 0.0, "allreduce_calls": 0, "allreduce_bytes": 0,
                "exposed": 0.0, "backward_compute": (backward[1] - backward[0]) if backward else 0.0}
    spans = sorted((b["start"], b["end"]) for b in buckets)
    busy, cur_a, cur_b = 0.0, *spans[0]
    for a, b in spans[1:]:
        if a > cur_b:
            busy, cur_a, cur_b = busy + cur_b - cur_a, a, b
        else:
            cur_b = max(cur_b, b)
    busy += cur_b - cur_a
    compute_done = max(b["start"] for b in buckets)
    comm_done = max(b["end"] for b in buckets)
    exposed = max(0.0, comm_done - compute_done)
    bwd = (backward[1] - backward[0]) if backward else 0.0
    return {"allreduce": busy, "allreduce_calls": len(buckets),
            "allreduce_bytes": sum(b["bytes"] for b in buckets),
            "exposed": exposed, "backward_compute": max(0.0, bwd - exposed)}


def _register(ddp_model, state, hook):
    try:
        ddp_model.register_comm_hook(state, hook)
    except RuntimeError as exc:
        if "only be called once" not in str(exc):
            raise
        raise RuntimeError("this DDP model already has a communication hook: pass it to "
                           "StepTimer(ddp_model, hook=..., state=...) instead, and the timer "
                           "registers it, wrapped") from exc


def _model_device(model):
    if model is None:
        return torch.device("cpu")
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def median_step(times: dict, skip: int = 2) -> dict:
    """Median of every per-step number of one rank, leaving out the first `skip`
    steps (DDP rebuilds its buckets after the first iteration; warm-up)."""
    import statistics
    steps = times["steps"][skip:] or times["steps"]
    keys = [k for k, v in steps[0].items() if isinstance(v, (int, float)) and k != "step"]
    return {k: statistics.median(s.get(k, 0.0) for s in steps) for k in keys}


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
