"""Build the course notebooks from their sources and regenerate their outputs.

Each notebook's source is `notebooks/src/NN_name.py` in jupytext's percent
format, paired with `notebooks/NN_name.ipynb` by `[tool.jupytext]` in
`pyproject.toml` (so a notebook edited and saved in JupyterLab updates its
source). This script reads a source with jupytext, executes it top to bottom
with nbclient in a fresh kernel (the one of this environment, in `notebooks/`),
cleans it and writes the `.ipynb`: the reference outputs nbval compares
against. Cleaning keeps outputs and execution counts and drops what changes
from run to run (execution timestamps, widget state, random cell ids) or is
jupytext's bookkeeping.

    python scripts/notebooks.py build [NAME ...]   # every notebook by default
    python scripts/notebooks.py check              # sources and notebooks agree

`make notebooks` runs the first. It is the only way reference outputs are made.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from jupytext.config import load_jupytext_config
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
SRC_DIR = NB_DIR / "src"
FMT = "py:percent"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
NB_METADATA = ("kernelspec", "language_info")
CELL_METADATA = ("tags",)  # all a source carries: cell_metadata_filter in pyproject.toml


def read_source(src: Path):
    """The notebook a source describes, not yet executed."""
    nb = jupytext.read(src, fmt=FMT, config=load_jupytext_config(str(SRC_DIR)))
    nb.metadata = nbformat.NotebookNode(kernelspec=KERNELSPEC, language_info={"name": "python"})
    return nb


def clean(nb):
    """Keep outputs, execution counts and tags; drop what changes from run to run and jupytext's bookkeeping."""
    nb.metadata = nbformat.NotebookNode({k: v for k, v in nb.metadata.items() if k in NB_METADATA})
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:03d}"  # stable ids: no diff noise between regenerations
        cell.metadata = nbformat.NotebookNode({k: v for k, v in cell.metadata.items() if k in CELL_METADATA})
        for out in cell.get("outputs", []):
            out.get("metadata", {}).pop("execution", None)
    return nb


def build(name: str, timeout: int) -> float:
    nb = read_source(SRC_DIR / f"{name}.py")
    os.environ["DDP_LESSONS_PROGRESS"] = "0"  # see ddp_lessons.progress
    t0 = time.monotonic()
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(NB_DIR)}}).execute()
    elapsed = time.monotonic() - t0
    nbformat.write(clean(nb), NB_DIR / f"{name}.ipynb")
    return elapsed


def next_step(src: Path, path: Path) -> str:
    """What to do about a pair that disagrees, by which side was written last."""
    if path.stat().st_mtime > src.stat().st_mtime:
        # An edit of the .ipynb that did not reach its source (a Jupyter without jupytext's
        # pairing): rebuilding from the source would throw it away.
        return (f"the notebook was saved after its source: write the source from it "
                f"(`.venv/bin/jupytext --sync notebooks/{path.name}`, or save it in `make lab`'s JupyterLab), "
                f"then `make notebooks NB={src.stem}`")
    return f"the source is newer: `make notebooks NB={src.stem}` rebuilds the notebook and its outputs from it"


def check() -> int:
    """Count the sources that jupytext would write differently, or whose stored notebook has other cells."""
    bad = 0
    config = load_jupytext_config(str(SRC_DIR))
    for src in sorted(SRC_DIR.glob("*.py")):
        nb = clean(read_source(src))
        # JupyterLab refuses to open a pair whose .ipynb is newer (as after a build)
        # when the two differ as text, so the source must be what jupytext writes.
        text = jupytext.writes(nb, fmt=FMT, config=config)
        if text != src.read_text():
            diff = difflib.unified_diff(src.read_text().splitlines(), text.splitlines(), lineterm="", n=1)
            print(f"notebooks/src/{src.name}: jupytext writes it as", *list(diff)[2:12], sep="\n  ")
            bad += 1
        path = NB_DIR / f"{src.stem}.ipynb"
        if not path.exists():
            print(f"{path.name}: missing; run `make notebooks`")
            bad += 1
            continue
        want = [(c.cell_type, c.source, c.metadata) for c in nb.cells]
        have = [(c.cell_type, c.source, c.metadata) for c in nbformat.read(path, as_version=4).cells]
        if want != have:
            i = next((i for i, (w, h) in enumerate(zip(want, have)) if w != h), min(len(want), len(have)))  # noqa: B905
            print(f"{path.name}: differs from notebooks/src/{src.name} from cell {i} on; {next_step(src, path)}")
            bad += 1
    return bad


def course_order() -> list[str]:
    """Every notebook, in the course's order: each case's (`Case.notebooks`), the cases in `cases.NAMES`'s order."""
    from ddp_lessons.cases import registry
    return [nb for case in registry().values() for nb in case.notebooks]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("names", nargs="*", help="notebook names (default: all)")
    b.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    sub.add_parser("check")
    args = p.parse_args(argv)
    if args.cmd == "check":
        return 1 if check() else 0
    names = [Path(n).stem for n in args.names] or course_order()
    for name in names:
        print(f"{name}: {build(name, args.timeout):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
