"""The DataLoader in a process the doctor started: `--confirm`'s loader knobs applied at construction
(its signature stays torch's: Lightning rebuilds loaders from it), each `next()` timed as the wait for a
batch, and a loader whose workers start named as such (`Recorder.loader_started`).
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
    ENDED = TIMED(REC.loader_ended)


def _loader(overrides: dict):
    timed = TIMED
    from torch.utils.data import DataLoader
    init, sig, it = DataLoader.__init__, inspect.signature(DataLoader.__init__), DataLoader.__iter__
    started = timed(lambda loader: REC.loader_started(REC.mark(), loader) if REC.timer is not None else None)

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
