"""A recorded GPU run, or the same run made live where the notebook has GPUs: the one replay of the
course. Each case passes how its runs are made (`results(config, where)`); this module checks the
record's kind, makes the new record and marks it live.

The notebooks show every GPU figure through `stored_or_live`: a GPU box measures it again, a CPU-only
one shows the record (whose machine, versions and commit the notebook prints beside it).
"""

from __future__ import annotations

from ..tool import records


def stored_or_live(name: str, results, where, kind: str | None = None, runs_dir=None, **config) -> dict:
    """The record `name`; or, where `where` (a `ddp_lessons.Placement`) runs on NCCL, the same run made live
    on this machine's GPUs: `results(record_config, where)` returns the new results, kept as a record of the
    same kind (its config updated with `config`), marked `live` and `rerun_of` name (never saved).
    Defined in notebook 01_case1_broken."""
    rec = records.load(name, runs_dir)
    if where.backend != "nccl":
        return rec
    return rerun(rec, results, where, kind, name=name, **config)


def rerun(rec: dict, results, where, kind: str | None = None, name: str | None = None, **config) -> dict:
    """A new record of the run `rec` describes, made on `where`'s ranks by `results(config, where)`."""
    if kind is not None and rec["kind"] != kind:
        raise ValueError(f"this replay makes {kind!r} runs again, not {rec['kind']!r} ones")
    c = rec["config"]
    live = records.make_record(rec["kind"], dict(c, **config), results(c, where), backend=where.backend)
    live.update(live=True, rerun_of=name)
    return live
