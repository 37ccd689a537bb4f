"""Live per-rank progress of a launch, shown in the notebook while it runs.

Workers call `ddp_lessons.report_progress(step, total)`; the parent receives the
messages and, once a run has lasted `SHOW_AFTER_S`, shows one line per rank in
a widget that disappears when the run ends, so the cell's final output is
only what the notebook itself prints and plots.

`DDP_LESSONS_PROGRESS=0` turns the display off: the reference outputs of the
notebooks are made with it off, because whether a run lasted 2 s or not is
not something a stored output may depend on.
"""

from __future__ import annotations

import os
import time

SHOW_AFTER_S = 2.0


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell"


def make_progress(progress, world_size):
    """Turn launch's `progress=` argument into a callable (or None)."""
    if progress is None:
        return None
    if progress == "auto":
        if os.environ.get("DDP_LESSONS_PROGRESS", "1") == "0" or not _in_notebook():
            return None
        return NotebookProgress(world_size)
    if callable(progress):
        return _CallableProgress(progress)
    raise ValueError(f"progress={progress!r}: use 'auto', None or a callable(rank, step, total)")


class _CallableProgress:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, rank, step, total):
        self.fn(rank, step, total)

    def close(self):
        pass


class NotebookProgress:
    """One text line per rank in an ipywidgets.HTML, shown after SHOW_AFTER_S."""

    def __init__(self, world_size):
        self.steps = [(0, None)] * world_size
        self.t0 = time.monotonic()
        self.widget = None

    def __call__(self, rank, step, total):
        self.steps[rank] = (step, total)
        if self.widget is None and time.monotonic() - self.t0 < SHOW_AFTER_S:
            return
        if self.widget is None:
            try:
                import ipywidgets
                from IPython.display import display
            except ImportError:  # the tool's light install in a notebook: no progress line
                self.t0 = float("inf")
                return
            self.widget = ipywidgets.HTML()
            display(self.widget)
        self.widget.value = "<pre>" + "\n".join(
            f"rank {r}: step {s}" + (f" / {t}" if t else "")
            for r, (s, t) in enumerate(self.steps)) + "</pre>"

    def close(self):
        if self.widget is not None:
            self.widget.close()  # the figures that follow replace it
