"""Case 2's recorded GPU runs, made again on this machine's GPU.

`replay.stored_or_live(name, rerun, where)` calls `rerun` where `where`
runs on NCCL: the run the record describes (`python -m ddp_lessons case2
--mode ...`, as `benchmarks/record_case2_gpu.sh` made it), with its options,
on `where`'s device. One-process modes run in this process.
Defined in notebook 04_case2_lightning.
"""

from __future__ import annotations

from ...tool import records
from ...tool.launcher import launch
from .lightning import fit_here, fit_worker
from .options import Options
from . import nvml, plain

SWEEP_STEPS = 60  # benchmarks/record_case2_gpu.sh: --steps 60


def _results(c: dict, rec: dict, opts: Options, where) -> dict:
    acc = where.accelerator
    if c["mode"] == "nvml":
        return nvml.costs(len(rec["results"].get("calls") or ()) or c.get("repeats", 50))
    if c["mode"] == "sweep":
        widths = c.get("widths") or [r["width"] for r in rec["results"]["rows"]]
        return {"rows": plain.compute_sweep(opts, widths, acc, c.get("steps", SWEEP_STEPS))}
    if c.get("launch"):
        out = {"lightning": launch(fit_worker, (opts, acc), world_size=where.world_size,
                                        backend=where.backend, timeout=600)}
        if c["mode"] == "fixed":
            out["plain"] = launch(plain.fit, (opts, acc), world_size=where.world_size,
                                  backend=where.backend, timeout=600)
        return out
    out = {"lightning": [fit_here(opts, 1, accelerator=acc)]}
    if c["mode"] == "fixed":
        out["plain"] = [plain.fit(opts, acc)]
    return out


def rerun(rec: dict, where) -> dict:
    """A new record of the case-2 run `rec` describes, made on `where`'s device."""
    if rec["kind"] != "case2":
        raise ValueError(f"case2.rerun reruns 'case2' records, not {rec['kind']!r}")
    c = rec["config"]
    opts = Options(**c["options"])
    config = dict(c, accelerator=where.accelerator)
    return records.make_record("case2", config, _results(c, rec, opts, where), backend=where.backend)
