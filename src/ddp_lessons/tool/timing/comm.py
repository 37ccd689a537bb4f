"""The all-reduce numbers of a step: the timing hook of mode "full" and its
bucket arithmetic, and how mode "light" fills a step from DDP's timings and the
flight recorder (see `timing.timer` and `timing.light`)."""

from __future__ import annotations

import weakref


class HookState:
    """The timing hook's state, which DDP's reducer keeps: the timer through a weak reference, and what
    to send with once the timer is gone. The reducer (C++) holds its hook's state, and the timer holds
    the model: with the timer as the state, model and timer would hold each other through C++, where
    Python's collector cannot see, and the model, its process group and gloo's threads would live until
    the interpreter's exit however the script freed them (where torch 2.13's gloo can abort the rank)."""
    __slots__ = ("timer", "send", "state")

    def __init__(self, timer):
        self.timer = weakref.ref(timer)
        self.send, self.state = timer._send, timer.state


def timed_comm_hook(state, bucket):
    """DDP communication hook: run the timer's hook on the bucket and time it.

    A plain function because DDP reads the hook's `__name__`, and its second
    parameter must be called `bucket`. Registered by `StepTimer` with a
    `HookState` of the timer as state. Bytes sent: the bucket's buffer as the inner hook leaves
    it (torch's compress wrappers, used by `hooks.compression_hook`, swap in
    the cast buffer; a hook that sends a buffer of its own, such as torch's
    PowerSGD, is counted at its gradients' size). `state`: a `HookState` (or the timer).
    """
    timer = state.timer() if isinstance(state, HookState) else state
    if timer is None:   # the timer was freed, the model trains on: send as the timer would have
        return state.send(state.state, bucket)
    ready = timer.clock.mark()
    grad_bytes = _nbytes(bucket.buffer())
    n = len(timer._steps)
    if n >= 2 and timer._tensor_step in (None, n):  # one step's, after DDP rebuilt its buckets
        timer._tensor_step = n
        timer._tensor_rows[bucket.index()] = [p.numel() * p.element_size() for p in bucket.parameters()]
    timer.sending = True      # what the inner hook calls is DDP's all-reduce, not the script's own collective
    try:
        fut = timer._send(timer.state, bucket)
    finally:
        timer.sending = False
    # handed to the backend: the time from `ready` to here is this hook's own (and the inner hook's
    # Python), kept apart from the exposed all-reduce
    sent = timer.clock.mark()
    sent_bytes, index = _nbytes(bucket.buffer()), bucket.index()

    def done(f):
        timer._bucket_done(index, ready, timer.clock.mark(), sent_bytes, grad_bytes, sent)
        return f.value()
    return fut.then(done)


def _nbytes(t):
    return t.numel() * t.element_size()


def light_numbers(steps, ddp_source, fr_source, device, model=None) -> str:
    """Mode "light": put DDP's timings (`ddp_source`, a `light.DDPLogging`) and the flight recorder's
    numbers (`fr_source`, a `light.FlightRecorderSource`) into `steps`; return the sources' names."""
    import torch

    from . import light
    if ddp_source is not None:
        ddp_source.finish(len(steps) - 1)
    ddp = ddp_source.per_step() if ddp_source is not None else {}
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None
    fr = fr_source.collect(sync) if fr_source is not None else {}
    # a step's all-reduce time from the recorder only where every duration is there and at a size
    # where durations were shown to agree with the kernel's (`light.TRUSTED_BYTES`)
    timed = {k for k, v in fr.items()
             if v and all(b["duration"] is not None and b["bytes"] >= light.TRUSTED_BYTES for b in v)}
    sizes = bucket_sizes(model) if model is not None else []
    for s in steps:
        _apply_light(s, ddp.get(s["step"]), fr.get(s["step"]), s["step"] in timed, has_exposed=ddp_source is not None,
                     sizes=sizes if s.get("sync") is not False else ())
    own = any("computed" in s for s in steps)
    parts = (["compute_end"] if own else []) + (["ddp_logging"] if ddp else []) + (["flight_recorder"] if fr else [])
    return "+".join(parts) or "none"


def bucket_sizes(model) -> list[int]:
    """DDP's bucket sizes in bytes (its rebuilt ones where it rebuilt them), from its logging data."""
    try:
        strs = model._get_ddp_logging_data()
    except Exception:  # noqa: BLE001 - not a DDP model, or a torch without it
        return []
    sizes = strs.get("rebuilt_bucket_sizes") or strs.get("bucket_sizes") or ""
    return [int(x) for x in str(sizes).replace(" ", "").split(",") if x]


def _apply_light(s, ddp, fr, fr_timed, has_exposed, sizes=()):
    """One step of mode "light": DDP's timings (`ddp`), the recorder's all-reduces (`fr`), the compute
    end's own split where the step has one (`computed`), `sizes`: DDP's bucket sizes (bytes)."""
    own = (s["exposed"], s["backward_compute"]) if "computed" in s else None
    if s.get("sync") is False:         # no_sync: nothing was sent
        own = (0.0, s.get("backward", 0.0)) if own is None else own
    if ddp is not None:
        s.update(allreduce=ddp["allreduce_span"], allreduce_span=ddp["allreduce_span"],
                 exposed=ddp["exposed"], allreduce_calls=ddp["calls"],
                 allreduce_bytes=ddp["grad_bytes"])
    if fr:
        s.update(allreduce_calls=len(fr), allreduce_bytes=sum(b["bytes"] for b in fr),
                 bucket_durations=fr)
        if fr_timed:
            s["allreduce"] = sum(b["duration"] for b in fr)  # one stream: no overlap between them
    if own is not None:                 # the compute end's mark decides, DDP's numbers are a cross-check
        s["exposed"], s["backward_compute"] = own
        if ddp is not None:
            s["ddp_exposed"] = ddp["exposed"]
    elif not has_exposed or ddp is None:  # not measured (no DDP timings, or a step DDP did not sample)
        s.pop("exposed", None)
    if ddp is None and not fr_timed:    # a step's all-reduce is unknown, not 0
        s.pop("allreduce", None)
    if ddp is None and not fr and not (own is not None and sizes):
        s.pop("allreduce_calls", None)
        s.pop("allreduce_bytes", None)
    elif ddp is None and not fr and own is not None:   # calls and bytes of DDP's buckets, from its logging data
        s["allreduce_calls"], s["allreduce_bytes"] = len(sizes), sum(sizes)
    if own is None:
        s["backward_compute"] = max(0.0, s.get("backward", 0.0) - s.get("exposed", 0.0))


def _comm_numbers(buckets, backward):
    """All-reduce busy time (union of bucket intervals), calls, bytes, exposed part, and the hook's own
    time (`hook_time`: each bucket's handover to the backend, Python that runs in the backward)."""
    if not buckets:
        return {"allreduce": 0.0, "allreduce_calls": 0, "allreduce_bytes": 0,
                "exposed": 0.0, "backward_compute": (backward[1] - backward[0]) if backward else 0.0}
    spans = sorted((b["start"], b["end"]) for b in buckets)
    busy = 0.0
    cur_a, cur_b = spans[0]
    for a, b in spans[1:]:
        if a > cur_b:
            busy, cur_a, cur_b = busy + cur_b - cur_a, a, b
        else:
            cur_b = max(cur_b, b)
    busy += cur_b - cur_a
    # the last bucket handed over (after the hook's own Python, `sent`) to the last all-reduce done
    compute_done = max(b.get("sent", b["start"]) for b in buckets)
    comm_done = max(b["end"] for b in buckets)
    exposed = max(0.0, comm_done - compute_done)
    hook = sum(max(0.0, b.get("sent", b["start"]) - b["start"]) for b in buckets)
    bwd = (backward[1] - backward[0]) if backward else 0.0
    return {"allreduce": busy, "allreduce_calls": len(buckets),
            "allreduce_bytes": sum(b["bytes"] for b in buckets),
            "exposed": exposed, "hook_time": hook, "backward_compute": max(0.0, bwd - exposed - hook)}


def _register(ddp_model, state, hook):
    try:
        ddp_model.register_comm_hook(state, hook)
    except RuntimeError as exc:
        if "only be called once" not in str(exc):
            raise
        raise RuntimeError("this DDP model already has a communication hook: pass it to "
                           "StepTimer(ddp_model, hook=..., state=...) instead, and the timer "
                           "registers it, wrapped") from exc

    def refuse(*_args, **_kwargs):
        # DDP takes one hook per model; a second call would end in torch's bare "can only be called once".
        raise RuntimeError("StepTimer already registered this DDP model's communication hook: pass your hook "
                           "to the timer instead (StepTimer(ddp_model, hook=your_hook, state=your_state)), "
                           "which registers it, wrapped")
    ddp_model.register_comm_hook = refuse  # this model only: an instance attribute
