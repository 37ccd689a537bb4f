"""Build the course notebooks from their sources and regenerate their outputs.

Each notebook is written as a plain Python file in `notebooks/src/NN_name.py`,
cells separated by `# %%` lines (markdown cells: `# %% [markdown]`, their
lines prefixed by `# `). This script turns a source into `notebooks/NN_name.ipynb`,
executes it top to bottom in a fresh kernel (the one of this environment,
in `notebooks/`), and saves it with its outputs and execution counts: the
reference outputs nbval compares against. Volatile metadata (execution
timestamps, widget state) is dropped.

    python scripts/notebooks.py build [NAME ...]   # every notebook by default
    python scripts/notebooks.py check              # sources and notebooks agree

`make notebooks` runs the first. It is the only way reference outputs are made.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
SRC_DIR = NB_DIR / "src"
CELL = re.compile(r"^# %%(?: \[(markdown)\])?(?:\s+tags=\[([^\]]*)\])?\s*$")


def parse(source: str) -> list:
    """Cells of a percent-format source, as nbformat cells."""
    cells, kind, tags, lines = [], None, [], []

    def flush():
        text = "\n".join(lines).strip("\n")
        if kind is None and not text:
            return
        if kind == "markdown":
            text = "\n".join(l[2:] if l.startswith("# ") else l.lstrip("#") for l in text.splitlines())
            cells.append(nbformat.v4.new_markdown_cell(text))
        else:
            cell = nbformat.v4.new_code_cell(text)
            if tags:
                cell.metadata["tags"] = tags
            cells.append(cell)

    for line in source.splitlines():
        m = CELL.match(line)
        if m:
            flush()
            kind = m.group(1) or "code"
            tags = [t.strip().strip("'\"") for t in (m.group(2) or "").split(",") if t.strip()]
            lines = []
        else:
            lines.append(line)
    flush()
    return cells


def new_notebook(src: Path):
    nb = nbformat.v4.new_notebook()
    nb.cells = parse(src.read_text())
    nb.metadata = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    return nb


def clean(nb):
    """Keep outputs and execution counts; drop what changes from run to run."""
    nb.metadata.pop("widgets", None)
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:03d}"  # stable ids: no diff noise between regenerations
        cell.metadata.pop("execution", None)
        for out in cell.get("outputs", []):
            out.get("metadata", {}).pop("execution", None)
    return nb


def build(name: str, timeout: int) -> float:
    src = SRC_DIR / f"{name}.py"
    nb = new_notebook(src)
    os.environ["DDP_LESSONS_PROGRESS"] = "0"  # see ddp_lessons.progress
    t0 = time.monotonic()
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(NB_DIR)}}).execute()
    elapsed = time.monotonic() - t0
    nbformat.write(clean(nb), NB_DIR / f"{name}.ipynb")
    return elapsed


def check() -> int:
    bad = 0
    for src in sorted(SRC_DIR.glob("*.py")):
        path = NB_DIR / f"{src.stem}.ipynb"
        if not path.exists():
            print(f"{path.name}: missing; run `make notebooks`")
            bad += 1
            continue
        stored = nbformat.read(path, as_version=4)
        want = [(c.cell_type, c.source) for c in parse(src.read_text())]
        have = [(c.cell_type, c.source) for c in stored.cells]
        if want != have:
            print(f"{path.name}: differs from notebooks/src/{src.name}; run `make notebooks`")
            bad += 1
    return bad


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
    names = [Path(n).stem for n in args.names] or [s.stem for s in sorted(SRC_DIR.glob("*.py"))]
    for name in names:
        print(f"{name}: {build(name, args.timeout):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
