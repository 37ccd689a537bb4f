"""One timed step as an object: `Step` (and its gradient buckets, `Bucket`), read once from the timer's JSON.

Every per-step number `StepTimer.result()` writes is a field, None where the result has none (a number
the timer did not measure is unknown, not 0). `step["key"]`, `step.get("key")` and `"key" in step` read
the JSON under its own names, as the step's dict answered them (KeyError where the key is absent).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Mapping

from ..timing.sync import ready_time

_EMPTY: Mapping = MappingProxyType({})


@dataclass(frozen=True)
class Bucket:
    """One gradient bucket's all-reduce in a step (mode "full"), seconds since the step's start: `start`
    when DDP handed it to the timing hook (its gradients ready), `sent` when the hook handed it to the
    backend, `end` when its all-reduce was done; `bytes` sent, `grad_bytes` its gradients' own."""
    index: int
    start: float
    end: float | None = None
    bytes: int = 0
    grad_bytes: int | None = None
    sent: float | None = None

    @property
    def handed(self) -> float:
        """When the backend got it (`sent`; `start` in results from before the hook's own time was kept)."""
        return self.start if self.sent is None else self.sent

    @classmethod
    def from_wire(cls, d: Mapping) -> Bucket:
        return cls(d.get("index", 0), d["start"], d.get("end"), d.get("bytes", 0), d.get("grad_bytes"), d.get("sent"))


@dataclass(frozen=True, kw_only=True)
class Step:
    """One step (a micro-step under accumulation) of one rank, seconds and bytes; defined in notebook
    00_first_launch. `step` is its index, `t_start` its start on the rank's own axis (since its timer's
    reference), `step_time` its length. `phases` maps every phase, the loop's own included, to its (start,
    end) since the step's start; `forward`, `backward`, `optimizer` are the usual phases' seconds
    (`seconds(name)` any phase's). `data` is the host's wait for the batch, `data_stall` what the device
    waited for it. `exposed` is the all-reduce the backward did not hide and `backward_compute` the rest
    of the backward; `wait` is the part of `exposed` spent waiting for a slower rank; `ready` when this
    rank's backward compute was done (`computed`: its mark, mode "light"). `allreduce` is the all-reduce's
    busy time, `allreduce_calls` and `allreduce_bytes` its calls and bytes, `buckets` each bucket (mode
    "full"); `allreduce_span` and `ddp_exposed` are DDP's own timings, `bucket_durations` the flight
    recorder's calls (mode "light"); `hook_time` the timing hook's own time. `sync`: whether the step
    all-reduced (False under no_sync); `optimizer_steps` and `forwards` what torch's hooks counted in it;
    `host` each phase's host span and `lag` the device's delay behind the host at the step's start (on a
    GPU); `collectives`, `collective_calls` and `collective_spans` the script's own collectives. `wire`
    is the step's JSON under its own names."""
    step: int | None = None
    step_time: float
    t_start: float | None = None
    data: float | None = None
    data_stall: float | None = None
    phases: Mapping[str, tuple[float, float]] = field(default_factory=lambda: _EMPTY)
    forward: float | None = None
    backward: float | None = None
    optimizer: float | None = None
    backward_compute: float | None = None
    exposed: float | None = None
    wait: float | None = None
    ready: float | None = None
    computed: float | None = None
    allreduce: float | None = None
    allreduce_span: float | None = None
    allreduce_calls: int | None = None
    allreduce_bytes: int | None = None
    buckets: tuple[Bucket, ...] = ()
    bucket_durations: tuple[Mapping[str, Any], ...] | None = None
    optimizer_steps: int | None = None
    forwards: int | None = None
    sync: bool | None = None
    host: Mapping[str, float] | None = None
    lag: float | None = None
    collectives: float | None = None
    collective_calls: int | None = None
    collective_spans: tuple[tuple[float, float], ...] = ()
    hook_time: float | None = None
    ddp_exposed: float | None = None
    wire: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, repr=False, compare=False)

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> Step:
        """A step of a timer's result (its "steps"). `ready`, in results from before the timer wrote it, is
        worked out as the timer does (`timing.sync.ready_time`)."""
        get = d.get
        spans = get("collective_spans")
        durations = get("bucket_durations")
        host = get("host")
        return cls(
            step=get("step"), step_time=d["step_time"], t_start=get("t_start"), data=get("data"),
            data_stall=get("data_stall"),
            phases=MappingProxyType({k: (a, b) for k, (a, b) in (get("phases") or {}).items()}),
            forward=get("forward"), backward=get("backward"), optimizer=get("optimizer"),
            backward_compute=get("backward_compute"), exposed=get("exposed"), wait=get("wait"),
            ready=get("ready") if "ready" in d else ready_time(d) if "t_start" in d else None,
            computed=get("computed"),
            allreduce=get("allreduce"), allreduce_span=get("allreduce_span"),
            allreduce_calls=get("allreduce_calls"), allreduce_bytes=get("allreduce_bytes"),
            buckets=tuple(Bucket.from_wire(b) for b in get("buckets") or ()),
            bucket_durations=None if durations is None else tuple(MappingProxyType(dict(b)) for b in durations),
            optimizer_steps=get("optimizer_steps"), forwards=get("forwards"), sync=get("sync"),
            host=None if host is None else MappingProxyType(dict(host)), lag=get("lag"),
            collectives=get("collectives"), collective_calls=get("collective_calls"),
            collective_spans=tuple((a, b) for a, b in spans or ()), hook_time=get("hook_time"),
            ddp_exposed=get("ddp_exposed"), wire=MappingProxyType(dict(d)))

    def with_wait(self, wait: float) -> Step:
        """This step with its wait for the slowest rank (`Run` works it out where the timers could not)."""
        return replace(self, wait=wait, wire=MappingProxyType({**self.wire, "wait": wait}))

    def __repr__(self) -> str:   # the numbers the step has, not the many it has not
        shown = []
        for f in fields(self):
            v = getattr(self, f.name)
            if f.repr and v is not None and not (isinstance(v, (tuple, Mapping)) and not v):
                shown.append(f"{f.name}={dict(v) if isinstance(v, Mapping) else v!r}")
        return f"Step({', '.join(shown)})"

    # the step's JSON under its own names (KeyError where absent), for code written against the dict
    def __getitem__(self, key: str) -> Any:
        return self.wire[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.wire.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.wire

    @property
    def backward_own(self) -> float:
        """The backward's compute: `backward_compute`, else (a result without the split) the whole backward."""
        if self.backward_compute is not None:
            return self.backward_compute
        return self.backward or 0.0

    @property
    def all_reduced(self) -> bool:
        """The step sent gradients (it has buckets or all-reduce calls)."""
        return bool(self.buckets or self.allreduce_calls)

    def seconds(self, phase: str) -> float | None:
        """A phase's seconds as the timer wrote them, the loop's own phases too (None where it wrote none)."""
        value = self.wire.get(phase)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
