"""What the doctor changes in a process it started, once torch is imported: torch's own classes and
hooks report to this process's `Recorder`; `--confirm`'s knobs are applied where the script builds its
objects. Only where the doctor's environment variable is set (`bootstrap/sitecustomize.py`).

Patched here: `DistributedDataParallel.__init__` and `register_comm_hook`, `torch.autograd.backward`,
`torch.save`; torch's global optimizer step hooks and, until the model is known, forward hooks. The
DataLoader: `loader`; the collectives a script calls itself: `collectives`; how the process ends
(forked and spawned ranks too, `destroy_process_group`): `launchers`. Loaded by its path, apart from
the package: standard library and torch only, until a model is built.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import sys
import threading
import time
import weakref
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
STOP_GRACE_S = 20.0   # after --steps stops the script, how long its own clean-up may take
REC: Any = None   # this process's Recorder (`install`)
_LOADER: list = []   # `rank.loader`, once loaded


def load(name: str, path: str):
    """The module at `path` (beside this file) under its package name `name`: one module per name in
    this process, whether the package is imported later or not."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, path))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def timed(fn):
    """A hook body whose own host time is counted in the recorder (what the doctor costs)."""
    clock = time.perf_counter

    def wrapper(*a, **k):
        t0 = clock()
        try:
            return fn(*a, **k)
        finally:
            REC.hook_s += clock() - t0
            REC.hook_calls += 1
    return wrapper


def install() -> None:
    global REC
    wire = load("ddp_lessons.tool.doctor.wire", os.path.join("..", "wire.py"))
    settings = wire.Settings.from_env()
    if REC is not None or settings is None:
        return
    recorder = load("ddp_lessons.tool.doctor.rank.recorder", "recorder.py")
    recorder.Recorder.profile_module = load("ddp_lessons.tool.doctor.rank.profile", "profile.py")
    REC = recorder.Recorder(settings, wire)
    _threads(settings.knobs.threads)
    _ddp(settings.knobs.ddp, settings.knobs.hook)
    _LOADER.append(load("ddp_lessons.tool.doctor.rank.loader", "loader.py"))
    _LOADER[0].install(REC, timed, settings.knobs.loader)
    _backward()
    _optimizer()
    _forwards()
    load("ddp_lessons.tool.doctor.rank.collectives", "collectives.py").install(REC, timed)
    _save()
    load("ddp_lessons.tool.doctor.rank.launchers", "launchers.py").install(REC, wire)


def _threads(n):
    """`threads=N`: torch's intra-op threads in the rank's own process. A DataLoader worker sets its own
    to 1 (torch's worker loop) and keeps it: the knob changes the ranks' threads, nothing else."""
    import torch
    if not n:
        return
    keep = torch.set_num_threads
    keep(int(n))

    def set_num_threads(k):
        if sys._getframe(1).f_code.co_name == "_worker_loop" or _in_worker():
            return keep(k)
        return keep(int(n))   # the knob holds against the script's own call
    torch.set_num_threads = set_num_threads


def _in_worker() -> bool:
    from torch.utils.data import get_worker_info
    return get_worker_info() is not None


def _ddp(overrides: dict, hook: str | None):
    from torch.nn.parallel import DistributedDataParallel as DDP
    init, sig = DDP.__init__, inspect.signature(DDP.__init__)

    @functools.wraps(init)   # its signature stays torch's: libraries read it (Lightning does)
    def __init__(self, *args, **kwargs):
        bound = sig.bind(self, *args, **kwargs)
        bound.arguments.update(overrides)
        init(*bound.args, **bound.kwargs)
        if REC.timer is None:
            REC.attach(self, ddp=True)
            _watch_model()
            if REC.timer.mode == "full":   # the script's own hook goes inside the timer's
                self.register_comm_hook = lambda state, h: REC.timer.wrap_comm_hook(h, state)
            if hook:
                from ddp_lessons.tool.hooks import compression_hook
                comp = compression_hook(hook)
                if REC.timer.mode == "full":
                    REC.timer.wrap_comm_hook(comp, self.process_group)
                else:
                    self.register_comm_hook(self.process_group, comp)
    DDP.__init__ = __init__


def _backward():
    import torch
    orig = torch.autograd.backward
    begin, end = timed(lambda: REC.backward(True)), timed(lambda: REC.backward(False))

    @functools.wraps(orig)
    def backward(*args, **kwargs):
        if REC.timer is None or not REC.opened:
            return orig(*args, **kwargs)
        begin()
        try:
            return orig(*args, **kwargs)
        finally:
            end()
    torch.autograd.backward = backward


def _optimizer():
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
    register_optimizer_step_pre_hook(timed(lambda opt, a, k: REC.optimizer(True)))
    register_optimizer_step_post_hook(timed(lambda opt, a, k: _after_step()))


def _after_step():
    REC.optimizer(False)
    if _GLOBAL.handles and _GLOBAL.stop:
        _drop_global()
    if REC.exit_now:   # --steps: the measured window (and any profiled steps after it) is over
        REC.exit_now = False
        _stop()


def _stop():
    """End the script at this optimizer step on every rank (all step together): SystemExit runs its
    clean-up (finally blocks, destroy_process_group); a script that swallows it is ended after a grace."""
    def hard():
        time.sleep(STOP_GRACE_S)
        os._exit(0)
    threading.Thread(target=hard, daemon=True).start()
    raise SystemExit(0)


def _watch_model():
    """The model's forward (and a DDP wrapper's module's) seen through an instance attribute `forward`
    around the class's: which forwards train, which evaluate. Not forward hooks: a module with hooks takes
    torch's slower dispatch for every call (about 4 us against 0.2 us here)."""
    import torch
    grad_on = torch.is_grad_enabled
    pre, post = timed(REC.forward), timed(REC.forward_done)

    def wrap(m):
        # the class's forward and a weak reference: the module's own wrapper must not hold it (a cycle through
        # its __dict__ would keep a DDP model, and so its process group, alive past the script's `del model`)
        ref, own = weakref.ref(m), m.__dict__.get("forward")
        inner = own if own is not None else type(m).forward

        def forward(*args, **kwargs):
            mod = ref()
            REC.module_calls += 1
            if REC.depth:   # called inside the wrapper's own forward (DDP's module): nothing to tell
                return inner(*args, **kwargs) if own is not None else inner(mod, *args, **kwargs)
            pre(mod, grad_on())
            REC.depth += 1
            try:
                out = inner(*args, **kwargs) if own is not None else inner(mod, *args, **kwargs)
            finally:
                REC.depth -= 1
            post(mod, grad_on(), out)
            return out
        # the bound forward's name, doc and signature (libraries read them: Hugging Face's Trainer drops the
        # batch's columns forward does not take), none of which holds the module
        forward.__name__, forward.__doc__ = inner.__name__, inner.__doc__
        forward.__signature__ = inspect.signature(m.forward)  # type: ignore[attr-defined]
        m.forward = forward
    for m, _ in REC.models:
        wrap(m)
    _calibrate()
    _LOADER[0].arm()
    _GLOBAL.stop = True


def _calibrate(n: int = 2000) -> None:
    """What the hooks cost outside the time they count themselves, per call: the timing wrapper's own call,
    and a forward through the instance wrapper (the wrapper's frame, the grad-mode reads) against a bare one."""
    import torch
    clock = time.perf_counter
    hook_s, calls = REC.hook_s, REC.hook_calls
    noop = timed(lambda: None)
    t0 = clock()
    for _ in range(n):
        noop()
    wrapper = max(0.0, (clock() - t0) - (REC.hook_s - hook_s)) / n
    REC.hook_s, REC.hook_calls = hook_s, calls
    m, x = torch.nn.Identity(), torch.empty(0)
    t0 = clock()
    for _ in range(n):
        m(x)
    bare = clock() - t0
    inner, grad_on = m.forward, torch.is_grad_enabled

    def forward(*args, **kwargs):
        grad_on()
        try:
            out = inner(*args, **kwargs)
        finally:
            grad_on()
        return out
    m.forward = forward
    t0 = clock()
    for _ in range(n):
        m(x)
    REC.per_call_s, REC.dispatch_s = wrapper, max(0.0, (clock() - t0 - bare) / n)


class _Global:
    handles: list = []
    stop = False


_GLOBAL = _Global()


def _forwards():
    """Until a DDP model is built, the first top-level module called with gradients is the model (a
    plain 1-process run): then its own hooks take over and the global one is removed (at the next
    optimizer step, outside any module call)."""
    from torch.nn.modules.module import register_module_forward_pre_hook

    def pre(module, args):
        if _GLOBAL.stop or REC.timer is not None:
            return
        import torch
        if torch.is_grad_enabled() and next(module.parameters(), None) is not None:
            REC.attach(module, ddp=False)
            _watch_model()   # from its next call on: this one already holds its unwrapped forward
            REC.forward(module, True)
    _GLOBAL.handles.append(register_module_forward_pre_hook(pre))


def _drop_global():
    for h in _GLOBAL.handles:
        h.remove()
    _GLOBAL.handles = []


def _save():
    import torch
    save = torch.save

    @functools.wraps(save)
    def saved(*args, **kwargs):
        token = REC.outside(REC.CHECKPOINT, True)
        try:
            return save(*args, **kwargs)
        finally:
            REC.outside(REC.CHECKPOINT, False, token)
    torch.save = saved
