"""What `launch` returns: every rank's return value, in rank order, and each
rank's captured output (stdout and stderr), kept after a successful run."""

from __future__ import annotations


class Results(list):
    """A list of the ranks' return values; `logs[rank]` is that rank's output
    (what it printed and logged; the end of it past `launcher.parent.LOG_KEEP`
    bytes). Empty when output was not captured or under torchrun, where each
    rank's output goes to torchrun's terminal."""

    def __init__(self, values=(), logs=None):
        super().__init__(values)
        self.logs = dict(logs or {})

    def __reduce__(self):  # pickles (and saves) as the plain list it is, with its logs
        return (Results, (list(self), self.logs))
