"""A recorded GPU run, or the same run made live where the notebook has GPUs.

The notebooks show every GPU figure through `stored_or_live`: a GPU box
measures it again, a CPU-only one shows the record (whose machine, versions
and commit the notebook prints beside it).
"""

from __future__ import annotations

from ..tool import records


def stored_or_live(name: str, rerun, where, runs_dir=None) -> dict:
    """The record `name`; or, where `where` (a `ddp_lessons.Placement`) runs on
    NCCL, the same run made live on this machine's GPUs: `rerun(record, where)`
    returns the new record, marked `live` and `rerun_of` name (never saved).
    The notebooks show a recorded GPU figure through this, so a GPU box
    measures it and a CPU-only one shows the record. Defined in notebook 01_case1_broken.
    """
    rec = records.load(name, runs_dir)
    if where.backend != "nccl":
        return rec
    live = rerun(rec, where)
    live.update(live=True, rerun_of=name)
    return live
