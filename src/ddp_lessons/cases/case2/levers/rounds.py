"""Case 2's levers timed in interleaved rounds and saved as one run record
(`benchmarks/case2_levers.py`): each lever built and warmed up in its own
try/except, so one that fails is recorded and the others still run; no round
starts that the time budget cannot hold; the record rewritten after every round.
Defined in notebook 06_case2_breakeven.
"""

from __future__ import annotations

import contextlib
import time
import warnings

import torch

from ....tool import spread
from ....tool.runs import read
from . import catalog


def _setup(names, cfg: catalog.Shapes, dev: torch.device, batches, res: dict, deadline: float) -> dict:
    """Build and warm up each lever in its own try/except: one that fails (a compile
    without a compiler, a capture error) is recorded, and the others still run."""
    steps = {}
    for name in names:
        entry = res["levers"].setdefault(name, {"description": catalog.LEVERS[name], "rounds": []})
        t0 = time.perf_counter()
        try:
            if time.time() > deadline:
                raise catalog.Skipped("the time budget was spent before its set-up")
            step = catalog.make_step(name, cfg, dev, batches)
            for _ in range(3):  # compiles, captures, allocates Adam's state: before any clock
                step()
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            entry.update(status="ok", setup_s=time.perf_counter() - t0)
            steps[name] = step
        except catalog.Skipped as exc:
            entry.update(status="skipped", reason=str(exc))
        except Exception as exc:  # noqa: BLE001 - one lever's failure is a result, not a lost run
            entry.update(status="error", error=f"{type(exc).__name__}: {exc}"[:2000])
    return steps


def _rounds(steps: dict, res: dict, rounds: int, count: int, warmup: int, dev, deadline: float, save) -> None:
    """Interleaved rounds (`spread.interleave`); no round starts that the longest so
    far would end past `deadline`; the record is saved after every round."""
    order, took = spread.interleave(list(steps), rounds), []
    for r, names in enumerate(order):
        if took and time.time() + max(took) > deadline:
            res["status"] = f"stopped by the time budget after {r} of {rounds} rounds"
            break
        t0 = time.time()
        for pos, name in enumerate(x for x in names if x in steps):
            entry = res["levers"][name]
            try:
                t = catalog.time_steps(steps[name], count, warmup, dev)
                t.pop("step_times")
                entry["rounds"].append({"round": r, "position": pos, **t})
            except Exception as exc:  # noqa: BLE001 - keep the rounds done, drop the lever
                entry.update(status="error", error=f"round {r}: {type(exc).__name__}: {exc}"[:2000])
                del steps[name]
        took.append(time.time() - t0)
        res["order"].append(names)
        res["rounds_done"] = r + 1
        if save:
            save(res)
    else:
        res["status"] = "complete"


def run_levers(names=tuple(catalog.LEVERS), cfg: dict | None = None, rounds: int = 5, steps: int = 300,
               warmup: int = 50, budget_s: float = 240.0, device: str | None = None, save=None) -> dict:
    """Time each lever of `names` in `rounds` interleaved rounds of `warmup` + `steps`
    steps; `save(results)` after every round. Returns the results: per lever its
    status, error or reason, set-up seconds and per-round summaries (median, IQR, ...)."""
    unknown = [n for n in names if n not in catalog.LEVERS]
    if unknown:
        raise ValueError(f"unknown lever(s) {unknown}: choose from {', '.join(catalog.LEVERS)}")
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda":
        dev = torch.device("cuda", dev.index or 0)
        torch.cuda.set_device(dev)
    cfg = {**catalog.default_config(), **(cfg or {})}
    res = {"status": "running", "device": str(dev), "timing": catalog.TIMING, "config": cfg, "levers": {},
           "order": [], "rounds_done": 0, "steps": steps, "warmup": warmup, "rounds": rounds}
    deadline = time.time() + budget_s
    group = catalog.one_rank_group(dev) if "ddp" in names else contextlib.nullcontext()
    with warnings.catch_warnings(), group:
        warnings.filterwarnings("ignore", message="Using a target size")  # the posted broadcast, on purpose
        shapes = read(catalog.Shapes, cfg)
        made = _setup(names, shapes, dev, catalog.make_batches(shapes, dev), res, deadline)
        _rounds(made, res, rounds, steps, warmup, dev, deadline, save)
    return res


def record(out, names=tuple(catalog.LEVERS), cfg: dict | None = None, tag: str | None = None, device: str | None = None,
           overwrite: bool = False, argv: dict | None = None, **run):
    """Run the levers (`run_levers(**run)`) and save one run record (`ddp_lessons.tool.records`,
    kind 'case2-levers') at `out` (a .json path, or a folder: case2-TAG-levers.json, TAG
    the GPU's model such as h200, or cpu), rewritten after every round. Returns its path."""
    from pathlib import Path

    from ....tool import records
    cuda = (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda")
    tag = tag or (torch.cuda.get_device_name().split()[-1].lower() if cuda else "cpu")
    out = Path(out)
    path = out if out.suffix == ".json" else out / f"case2-{tag}-levers.json"
    if path.exists() and not overwrite:
        raise records.RecordError(f"{path} exists: pass --overwrite to replace it, or another --tag/--out")
    config = {"script": "benchmarks/case2_levers.py", "args": {k: str(v) for k, v in (argv or {}).items()},
              "levers": {n: catalog.LEVERS.get(n, "?") for n in names}, "timing": catalog.TIMING,
              "rules": {"steady": spread.STEADY_RULE}}
    rec = records.make_record("case2-levers", config, None, backend="nccl" if cuda else "gloo")
    if cuda:
        rec["machine"]["topology"] = records.gpu_topology()

    def save(res):
        rec["results"] = res
        records.save(rec, path, overwrite=True)
        print(f"{res['status']}, {res['rounds_done']} round(s): "
              + "; ".join(_line(n, e) for n, e in res["levers"].items()),
              flush=True)
    save(run_levers(names, cfg, device=device, save=save, **run))
    return path


def _line(name: str, entry: dict) -> str:
    if entry.get("status") != "ok":
        return f"{name} {entry.get('status')}: {entry.get('reason') or entry.get('error')}"
    last = entry["rounds"][-1] if entry["rounds"] else None
    return f"{name} {last['median'] * 1e3:.3f} ms (IQR {last['iqr_rel']:.1%})" if last else f"{name} set up"
