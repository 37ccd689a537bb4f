"""Execute every course notebook top to bottom on this machine and record the result.

Reads the stored notebooks (`notebooks/NN_name.ipynb`) with nbformat, runs each
in a fresh kernel with nbclient (cwd `notebooks/`, `DDP_LESSONS_PROGRESS=0`, a
timeout per cell), never writes outputs back, and saves one run record
(`ddp_lessons.tool.records`, kind "notebook-run") with one entry per notebook:
name, passed, seconds, and the first error (cell index, ename, the first line
of evalue and its last lines: a worker's exception arrives as
"-- Process N terminated with the following error:" followed by its traceback). Exit status 1 when a notebook failed.

    python scripts/run_notebooks.py --record notebooks-h200x1
    python scripts/run_notebooks.py --only 00_first_launch --record notebooks-cpu2-00
    python scripts/run_notebooks.py --from-source ...   # the jupytext sources (needs jupytext)
    python scripts/run_notebooks.py --jobs 4 ...         # 4 at once (a machine with cores to spare)

The kernel is ipykernel on this interpreter (`sys.executable -m
ipykernel_launcher`), from a kernelspec this script writes in a temporary
directory: no installed kernelspec is needed or used, and the kernel sees the
same packages and PYTHONPATH as the script (on a machine where ipykernel comes
from wheels put on PYTHONPATH, that is what makes it work).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
KERNEL = "python3"


def kernel_manager(spec_dir: Path) -> KernelManager:
    """A manager for ipykernel on this interpreter, whatever kernelspecs are installed."""
    spec = spec_dir / "kernels" / KERNEL
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (this interpreter)", "language": "python"}))
    ksm = KernelSpecManager(kernel_dirs=[str(spec.parent)], ensure_native_kernel=False)
    return KernelManager(kernel_name=KERNEL, kernel_spec_manager=ksm)


def read(name: str, from_source: bool):
    if not from_source:
        return nbformat.read(NB_DIR / f"{name}.ipynb", as_version=4)
    sys.path.insert(0, str(ROOT / "scripts"))
    import notebooks as build  # jupytext's reading, as `make notebooks` does it
    return build.read_source(NB_DIR / "src" / f"{name}.py")


def first_line(text) -> str:
    lines = [s for s in str(text).strip().splitlines() if s.strip()]
    return lines[0] if lines else ""


def tail(text, lines: int = 12) -> list[str]:
    """The last non-blank lines of an error message: where a worker's traceback ends."""
    return [s for s in str(text).strip().splitlines() if s.strip()][-lines:]


def run_one(name: str, timeout: int, from_source: bool, spec_dir: Path, keep: Path | None = None) -> dict:
    """Execute one notebook in a fresh kernel; its entry of the record."""
    nb = read(name, from_source)
    current = {"cell": None}
    client = NotebookClient(
        nb, km=kernel_manager(spec_dir), timeout=timeout, startup_timeout=120,
        resources={"metadata": {"path": str(NB_DIR)}},
        on_cell_execute=lambda cell, cell_index: current.update(cell=cell_index))
    client.owns_km = True  # so nbclient shuts this kernel down after the notebook, as one it started
    error = None
    t0 = time.monotonic()
    try:
        client.execute()
    except CellExecutionError as exc:
        error = {"ename": exc.ename, "evalue": first_line(exc.evalue), "tail": tail(exc.evalue)}
    except CellTimeoutError as exc:
        error = {"ename": "CellTimeoutError", "evalue": first_line(exc)}
    except DeadKernelError as exc:
        error = {"ename": "DeadKernelError", "evalue": first_line(exc)}
    seconds = time.monotonic() - t0
    if keep is not None:  # the executed copy, to read what a machine printed (never the stored notebook)
        nbformat.write(nb, keep / f"{name}.ipynb")
    if error is not None:
        i = current["cell"]
        error = {"cell": i, "source": first_line(nb.cells[i].source) if i is not None else None, **error}
    return {"name": name, "passed": error is None, "seconds": round(seconds, 1), "error": error}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--record", metavar="NAME", help="save data/runs/NAME.json (name it after the machine)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing record")
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="run only this notebook (repeat for more); default: every one")
    p.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    p.add_argument("--from-source", action="store_true",
                   help="execute notebooks/src/NN_name.py (read with jupytext) instead of the stored .ipynb")
    p.add_argument("--jobs", type=int, default=1,
                   help="notebooks at once, each in its own process and kernel (their seconds then overlap)")
    p.add_argument("--keep-executed", metavar="DIR", type=Path,
                   help="also write each executed notebook to DIR (for reading, not for committing)")
    args = p.parse_args(argv)
    if args.keep_executed:
        args.keep_executed.mkdir(parents=True, exist_ok=True)
    names = [Path(n).stem for n in args.only] or [q.stem for q in sorted(NB_DIR.glob("[0-9][0-9]_*.ipynb"))]
    os.environ["DDP_LESSONS_PROGRESS"] = "0"  # the kernels inherit it: no live progress widgets
    from ddp_lessons.tool import records
    from ddp_lessons.tool.paths import RUNS_DIR
    if args.record and records._path(args.record, RUNS_DIR).exists() and not args.overwrite:
        p.error(f"data/runs/{args.record}.json exists: pass --overwrite or choose another name")
    entries = []
    with tempfile.TemporaryDirectory(prefix="ddp_lessons-kernel-") as spec_dir, \
            concurrent.futures.ProcessPoolExecutor(max(1, args.jobs)) as pool:
        jobs = [pool.submit(run_one, name, args.timeout, args.from_source, Path(spec_dir), args.keep_executed)
                for name in names]
        for job in concurrent.futures.as_completed(jobs):
            entry = job.result()
            entries.append(entry)
            err = entry["error"]
            how = "passed" if entry["passed"] else f"FAILED at cell {err['cell']}: {err['ename']}: {err['evalue']}"
            print(f"{entry['name']}: {how} ({entry['seconds']:.1f} s)", flush=True)
            if not entry["passed"] and err.get("tail"):
                print("\n".join("    " + line for line in err["tail"]), flush=True)
            if args.record:  # rewritten after every notebook: a run cut short keeps what it did
                _save(args, names, entries, records, RUNS_DIR)
    if args.record:
        print("saved", records._path(args.record, RUNS_DIR))
    return 0 if all(e["passed"] for e in entries) else 1


def _save(args, names, entries, records, runs_dir):
    config = {"notebooks": names, "timeout": args.timeout, "from_source": args.from_source, "jobs": args.jobs,
              "kernel": [sys.executable, "-m", "ipykernel_launcher"], "done": len(entries)}
    rec = records.make_record("notebook-run", config, sorted(entries, key=lambda e: e["name"]))
    if rec["machine"]["gpus"]:
        rec["machine"]["topology"] = records.gpu_topology()
    records.save(rec, args.record, runs_dir=runs_dir, overwrite=True)
    for d in (args.keep_executed,) if args.keep_executed else ():
        records.save(rec, args.record, runs_dir=d, overwrite=True)


if __name__ == "__main__":
    sys.exit(main())
