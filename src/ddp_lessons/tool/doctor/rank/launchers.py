"""How a rank's process ends, whatever started it, so that its result is written once, with why.

- torchrun, `python -m torch.distributed.run`, a plain `python`, Lightning's `ddp` (it re-runs the
  script): the interpreter's exit (`atexit`), or `destroy_process_group` first.
- `torch.multiprocessing` (`mp.spawn`, `start_processes`, spawn or fork) and Lightning's `ddp_spawn` and
  `ddp_fork`: a multiprocessing child leaves through `os._exit`, past `atexit`, so the result is written by
  a multiprocessing finalizer (run by the child's `_exit_function`). A forked child inherits its parent's
  recorder: it is reset at the fork (its own pid, nothing timed), and torch's `_wrap` around the rank's
  function is wrapped to see a rank that failed (torch turns the exception into exit status 1).
- SIGINT (Ctrl-C reaching the ranks) and SIGTERM: said as such.
"""

from __future__ import annotations

import atexit
import functools
import multiprocessing.util as mp_util
import os
import signal
import sys
import threading
from typing import Any

REC: Any = None    # the process's Recorder, and the wire module (set by `install`)
WIRE: Any = None


def install(rec, wire) -> None:
    global REC, WIRE
    REC, WIRE = rec, wire
    atexit.register(lambda: REC.finish(ended()))
    _finalizer()
    mp_util.register_after_fork(REC, _after_mp_fork)
    os.register_at_fork(after_in_child=_forked)
    _destroy()
    _spawn_wrap()
    _signals()


def ended() -> str:
    """How the script ended, read at exit: an uncaught exception is left in sys.last_value by then."""
    exc = getattr(sys, "last_value", None)
    if isinstance(exc, KeyboardInterrupt):
        return WIRE.INTERRUPTED
    return WIRE.raised(type(exc).__name__) if isinstance(exc, Exception) else WIRE.ENDED


def _finalizer() -> None:
    # run by multiprocessing's _exit_function: at a multiprocessing child's end, and at the main process's exit
    mp_util.Finalize(None, lambda: REC.finish(ended()), exitpriority=100)


def _forked() -> None:
    """In any forked child (a forked rank, a DataLoader worker): a recorder of its own, nothing timed."""
    if REC is not None and REC.pid != os.getpid():
        REC.reset()


def _after_mp_fork(rec) -> None:
    """In a multiprocessing child made by fork, after it cleared the finalizers it inherited."""
    _finalizer()


def _destroy() -> None:
    import torch.distributed as dist
    destroy = dist.destroy_process_group

    @functools.wraps(destroy)
    def destroy_process_group(*args, **kwargs):
        REC.finish(WIRE.DESTROYED)
        return destroy(*args, **kwargs)
    dist.destroy_process_group = destroy_process_group


def _spawn_wrap() -> None:
    """torch.multiprocessing's `_wrap` runs the rank's function: an exception becomes `sys.exit(1)` and
    Ctrl-C is swallowed. Wrapped (under its own name: a spawned child finds it by name) to see both."""
    import importlib
    try:   # the module (torch.multiprocessing's attribute `spawn` is the function of that name)
        sp = importlib.import_module("torch.multiprocessing.spawn")
    except ImportError:
        return
    orig = sp._wrap
    if getattr(orig, "_ddp_lessons", False):
        return

    @functools.wraps(orig)
    def _wrap(fn, i, *rest):
        try:
            return orig(fn, i, *rest)
        except SystemExit as exc:
            if exc.code not in (0, None):
                REC.failed = WIRE.raised("an exception (torch.multiprocessing ended the rank with status "
                                         f"{exc.code}; its traceback is above)")
            raise
    _wrap._ddp_lessons = True  # type: ignore[attr-defined]
    _wrap.__module__, _wrap.__qualname__ = orig.__module__, orig.__qualname__
    sp._wrap = _wrap  # type: ignore[attr-defined]


def _signals() -> None:
    """SIGINT and SIGTERM noted before the script's own handling of them (where it left Python's)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        def interrupted(signum, frame):
            REC.interrupted = True
            signal.default_int_handler(signum, frame)
        signal.signal(signal.SIGINT, interrupted)
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        def term(signum, frame):
            REC.finish(WIRE.TERMINATED)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
        signal.signal(signal.SIGTERM, term)
