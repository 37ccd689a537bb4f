"""The DataLoader in a process the doctor started: `--confirm`'s loader knobs applied at construction
(its signature stays torch's: Lightning rebuilds loaders from it), each `next()` timed as the wait for a
batch, and a loader's workers starting and stopping named as such.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

REC: Any = None
TIMED: Any = None
ENDED: Any = None    # the recorder's `loader_ended`, timed


def install(rec, timed, overrides: dict) -> None:
    global REC, TIMED
    REC, TIMED = rec, timed
    _loader(overrides)


def arm() -> None:
    """A model is timed: batches are timed from now on."""
    global ENDED
    _Batches.data = TIMED(REC.data)
    ENDED = TIMED(_ended)


def _started(start, loader) -> None:
    """A loader with workers was iterated from token `start`: its workers start, its first batch comes
    next. Named apart once its first batch's use is known (`Recorder._loader_start`)."""
    if REC.timer is not None:
        REC._end_eval()   # an evaluation ends at its last forward; what follows is this loader's
        REC._loader_start(training=True)
        REC.pending_start = {"loader": loader, "a": start, "b": None, "c": None}


def _ended(token, loader) -> None:
    """A loader with workers ran out of batches from the wait that began at `token`: its workers are shut
    down (joined) before `next()` raises StopIteration, outside any step."""
    if REC.timer is not None and token is not None and loader.num_workers:
        REC.timer.outside_span(REC.LOADER_START, token[0], REC.mark())


def _loader(overrides: dict):
    timed = TIMED
    from torch.utils.data import DataLoader
    init, sig, it = DataLoader.__init__, inspect.signature(DataLoader.__init__), DataLoader.__iter__
    started = timed(lambda loader: _started(REC.mark(), loader) if REC.timer is not None else None)

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
        # a loader whose workers start now (not persistent ones already running): its start is named
        if self.num_workers and getattr(self, "_iterator", None) is None:
            started(self)
        return _Batches(it(self), self)
    DataLoader.__init__, DataLoader.__iter__ = __init__, __iter__


class _Batches:
    """A loader's iterator, each `next()` timed as the wait for a batch."""
    __slots__ = ("inner", "loader")
    data = None   # the recorder's `data`, timed (set at the first model)

    def __init__(self, inner, loader):
        self.inner, self.loader = inner, loader

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.inner)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __next__(self):
        data = _Batches.data
        if data is None or REC.timer is None:
            return next(self.inner)
        token = data(True)
        try:
            batch = next(self.inner)   # the end of the loader (StopIteration) opens no step
        except StopIteration:
            ENDED(token, self.loader)
            raise
        data(False, token, self.loader)
        return batch
