"""What the doctor changes in a process it started, once torch is imported: torch's own classes and
hooks report to this process's `Recorder`; `--confirm`'s knobs are applied where the script builds
its objects. Only where the doctor's environment variable is set (`bootstrap/sitecustomize.py`).

Patched here: `DistributedDataParallel.__init__` and `register_comm_hook`, `DataLoader.__init__` and
`__iter__`, `torch.autograd.backward`, `torch.save`, `destroy_process_group` (the result is written
first); torch's global optimizer step hooks and, until the model is known, forward hooks.
Loaded by its path, apart from the package: standard library and torch only, until a model is built.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import json
import os
import signal
import sys
import threading
import time

ENV_DIR, ENV_STEPS, ENV_WARMUP, ENV_SET = ("DDP_LESSONS_DOCTOR_DIR", "DDP_LESSONS_DOCTOR_STEPS",
                                           "DDP_LESSONS_DOCTOR_WARMUP", "DDP_LESSONS_DOCTOR_SET")
STOP_GRACE_S = 20.0   # after --steps stops the script, how long its own clean-up may take
REC = None


def _timed(fn):
    """A hook body whose own host time is counted in the recorder (what the doctor costs)."""
    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            REC.hook_s += time.perf_counter() - t0
            REC.hook_calls += 1
    return wrapper


def _recorder_class():
    """`recorder.Recorder`, loaded from beside this file (this module may be loaded outside its package)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recorder.py")
    spec = importlib.util.spec_from_file_location("ddp_lessons_doctor_recorder", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Recorder


def install() -> None:
    global REC
    if REC is not None or not os.environ.get(ENV_DIR):
        return
    Recorder = _recorder_class()
    steps = int(os.environ.get(ENV_STEPS) or 0) or None
    REC = Recorder(os.environ[ENV_DIR], steps, int(os.environ.get(ENV_WARMUP) or 3))
    knobs = json.loads(os.environ.get(ENV_SET) or "{}")
    REC.knobs = knobs
    _threads(knobs.get("threads"))
    _ddp(knobs.get("ddp") or {}, knobs.get("hook"))
    _loader(knobs.get("loader") or {})
    _backward()
    _optimizer()
    _forwards()
    _save_and_exit()


def _threads(n):
    import torch
    if not n:
        return
    torch.set_num_threads(int(n))
    keep = torch.set_num_threads
    torch.set_num_threads = lambda _n: keep(int(n))   # the knob holds against the script's own call


def _ddp(overrides: dict, hook: str | None):
    from torch.nn.parallel import DistributedDataParallel as DDP
    init, sig = DDP.__init__, inspect.signature(DDP.__init__)

    @functools.wraps(init)   # its signature stays torch's: libraries read it (Lightning does)
    def __init__(self, *args, **kwargs):
        bound = sig.bind(self, *args, **kwargs)
        bound.arguments.update(overrides)
        init(*bound.args, **bound.kwargs)
        if REC.timer is None:
            REC.attach(self)
            _watch_model(self)
            if REC.timer.mode == "full":   # the script's own hook goes inside the timer's
                self.register_comm_hook = lambda state, h: REC.adopt_hook(state, h)
            if hook:
                from ddp_lessons.tool.hooks import compression_hook
                comp = compression_hook(hook)
                if REC.timer.mode == "full":
                    REC.adopt_hook(self.process_group, comp)
                else:
                    self.register_comm_hook(self.process_group, comp)
    DDP.__init__ = __init__


def _loader(overrides: dict):
    from torch.utils.data import DataLoader
    init, sig, it = DataLoader.__init__, inspect.signature(DataLoader.__init__), DataLoader.__iter__

    @functools.wraps(init)   # its signature stays torch's: Lightning rebuilds loaders from it
    def __init__(self, *args, **kwargs):
        bound = sig.bind(self, *args, **kwargs)
        bound.arguments.update(overrides)
        if not bound.arguments.get("num_workers"):
            bound.arguments.pop("persistent_workers", None)   # only with workers
            bound.arguments.pop("prefetch_factor", None)
        init(*bound.args, **bound.kwargs)

    @functools.wraps(it)
    def __iter__(self):
        return _Batches(it(self), self)
    DataLoader.__init__, DataLoader.__iter__ = __init__, __iter__


class _Batches:
    """A loader's iterator, each `next()` timed as the wait for a batch."""

    def __init__(self, inner, loader):
        self.inner, self.loader = inner, loader

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.inner)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __next__(self):
        token = _timed(REC.data)(True)
        batch = next(self.inner)   # the end of the loader (StopIteration) opens no step
        _timed(REC.data)(False, token, self.loader)
        return batch


def _backward():
    import torch
    orig = torch.autograd.backward

    @functools.wraps(orig)
    def backward(*args, **kwargs):
        _timed(REC.backward)(True)
        try:
            return orig(*args, **kwargs)
        finally:
            _timed(REC.backward)(False)
    torch.autograd.backward = backward


def _optimizer():
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
    register_optimizer_step_pre_hook(_timed(lambda opt, a, k: REC.optimizer(True)))
    register_optimizer_step_post_hook(_timed(lambda opt, a, k: _after_step()))


def _after_step():
    REC.optimizer(False)
    if REC.stopping and not REC.finished:
        REC.finish(REC.STOPPED)
        _stop()


def _stop():
    """End the script at this optimizer step on every rank (all step together): SystemExit runs its
    clean-up (finally blocks, destroy_process_group); a script that swallows it is ended after a grace."""
    def hard():
        time.sleep(STOP_GRACE_S)
        os._exit(0)
    threading.Thread(target=hard, daemon=True).start()
    raise SystemExit(0)


def _watch_model(model):
    """Instance hooks on the model (and a DDP wrapper's module): which forwards train, which evaluate."""
    def pre(module, args):
        grad = __import__("torch").is_grad_enabled()
        REC.forward(module, grad)
        REC.depth += 1

    def post(module, args, out):
        REC.depth -= 1
        REC.forward_done(__import__("torch").is_grad_enabled())
    for m, _ in REC.models:
        m.register_forward_pre_hook(_timed(pre), prepend=True)
        m.register_forward_hook(_timed(post))
    _GLOBAL.stop = True


class _Global:
    handles: list = []
    stop = False


_GLOBAL = _Global()


def _forwards():
    """Until a DDP model is built, the first top-level module called with gradients is the model (a
    plain 1-process run): then its own hooks take over and the global ones are removed (at the next
    optimizer step, outside any module call)."""
    from torch.nn.modules.module import register_module_forward_pre_hook

    def pre(module, args):
        if _GLOBAL.stop or REC.timer is not None:
            return
        import torch
        if torch.is_grad_enabled() and next(module.parameters(), None) is not None:
            REC.plain(module)
            _watch_model(module)
            REC.forward(module, True)
            REC.depth += 1
    _GLOBAL.handles.append(register_module_forward_pre_hook(pre))
    from torch.optim.optimizer import register_optimizer_step_post_hook
    register_optimizer_step_post_hook(lambda opt, a, k: _drop_global())


def _drop_global():
    if _GLOBAL.stop and _GLOBAL.handles:
        for h in _GLOBAL.handles:
            h.remove()
        _GLOBAL.handles = []


def _ended() -> str:
    """How the script ended, read at exit: an uncaught exception is left in sys.last_value by then."""
    assert REC is not None
    exc = getattr(sys, "last_value", None)
    return f"the script raised {type(exc).__name__}" if isinstance(exc, Exception) else REC.ENDED


def _save_and_exit():
    import torch
    import torch.distributed as dist
    save = torch.save

    @functools.wraps(save)
    def saved(*args, **kwargs):
        token = REC.outside("checkpoint (torch.save)", True)
        try:
            return save(*args, **kwargs)
        finally:
            REC.outside("checkpoint (torch.save)", False, token)
    torch.save = saved
    destroy = dist.destroy_process_group

    @functools.wraps(destroy)
    def destroy_process_group(*args, **kwargs):
        REC.finish(REC.DESTROYED)
        return destroy(*args, **kwargs)
    dist.destroy_process_group = destroy_process_group
    atexit.register(lambda: REC.finish(_ended()))
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None) and threading.current_thread() is \
            threading.main_thread():
        def term(signum, frame):
            REC.finish("the script was terminated (SIGTERM)")
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
        signal.signal(signal.SIGTERM, term)
