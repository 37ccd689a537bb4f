"""Notebook 00's answer, as its opening cell states it, recomputed from the records it cites: the default
timer's cost (timer-cost-h200x1) and the doctor's (doctor-cost-h100x1). A record made again, or a change in
how the notebook reads it, fails here until the opening says what the record now gives."""

import re
from pathlib import Path

import jupytext

from ddp_lessons.tool import records
from ddp_lessons.cases.intro import readout

SOURCE = Path(__file__).resolve().parents[3] / "notebooks" / "src" / "00_first_launch.py"


def _opening() -> str:
    md = [c.source for c in jupytext.read(SOURCE).cells if c.cell_type == "markdown"]
    return " ".join(md[1].split())   # the cell after the title, its lines joined


def test_the_opening_quotes_the_default_timers_recorded_cost_and_spread():
    words = readout.cost_spread(readout.cost_rounds(records.load("timer-cost-h200x1"))["light"])
    assert words == "median +5%, unresolved (-6% to +41%)"   # what the opening says; the record decides it
    assert f"3 ms GPU step {words} at world size 1 (recorded, one H200)" in _opening()


def test_the_opening_quotes_the_doctors_recorded_cost_without_its_profiled_steps():
    rows = readout.doctor_cost(records.load("doctor-cost-h100x1"))
    row = next(r for r in rows if r["arm"] == "doctor-noprofile")
    words = readout.cost_spread(row, digits=1)
    step = re.search(r"of a ([\d.]+) ms step \(recorded, one H100\)", _opening())
    assert step and float(step.group(1)) == round(row["step_ms"], 1)
    assert f"{words} of a {step.group(1)} ms step" in _opening()
    assert words.startswith("median +4.9%, resolved")                # every round cost more


def test_the_opening_hard_codes_no_figure_measured_here():
    # the all-reduce's latency is printed by the sweep, not written into the answer
    assert "measured here" in _opening() and not re.search(r"\d+(\.\d+)? ?ms up to 64 KiB", _opening())
