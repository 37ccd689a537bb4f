"""Where the repository keeps its data: the stand-in datasets and the run records.

A leaf of the tool: it imports nothing from ddp_lessons.
"""

from __future__ import annotations

from pathlib import Path

# src/ddp_lessons/tool/paths.py -> the repository (an editable install: `make install`).
REPO = Path(__file__).resolve().parents[3]
DATA_DIR = REPO / "data"
RUNS_DIR = DATA_DIR / "runs"
