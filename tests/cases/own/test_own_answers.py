"""Notebook 07's answer, as its opening cell states it, recomputed from the record and the model it cites
(own-run-h200x1: the evaluation's share of the 1-GPU run, Amdahl's cap on 2 such GPUs, the GPU's busy
share over the traced steps); and the commands 07 prescribes, each like for like."""

import re
from pathlib import Path

import jupytext
import pytest

from ddp_lessons import Record, Run
from ddp_lessons.cases.own import gpu, readout

SOURCE = Path(__file__).resolve().parents[3] / "notebooks" / "src" / "07_diagnose_your_own_run.py"


def _markdown() -> list[str]:
    return [" ".join(c.source.split()) for c in jupytext.read(SOURCE).cells if c.cell_type == "markdown"]


def _opening() -> str:
    return _markdown()[1]   # the cell after the title


def test_the_opening_quotes_the_recorded_evaluation_share_and_its_modelled_cap():
    m = re.search(r"one-H200 run s was (\d+)%, a cap of ([\d.]+)x \(modelled from the recorded share\)", _opening())
    assert m, "the opening no longer states the recorded share and its cap as this test reads them"
    share, cap = gpu.evaluation_cap(Record.load(gpu.RUN))
    assert int(m.group(1)) == round(share * 100) and float(m.group(2)) == round(cap, 2)


def test_the_opening_quotes_the_recorded_busy_share():
    m = re.search(r"busy (\d+)% of the traced steps \(recorded\)", _opening())
    busy, traced = readout.busy_share(Run.load(gpu.RUN, setup="broken"))
    assert m and int(m.group(1)) == round(busy * 100) and traced == 3


def test_the_cap_is_amdahls_bound():
    assert readout.amdahl(0.0) == 2.0 and readout.amdahl(1.0) == 1.0
    assert readout.amdahl(0.15) == pytest.approx(1 / (0.15 + 0.85 / 2)) and readout.amdahl(0.5, ranks=4) == 1.6


def test_every_torchrun_command_07_prescribes_pins_the_threads():
    # torchrun sets OMP_NUM_THREADS=1 only when it starts more than one process (torch/distributed/run.py):
    # unpinned, a 1-rank run gets every core's threads and each of 2 ranks one
    commands = [c for cell in _markdown() for c in cell.split("`")[1::2] if "torchrun" in c]   # code spans
    assert commands, "07 prescribes no torchrun command any more: drop this test"
    assert all("OMP_NUM_THREADS=" in c.split("torchrun")[0] for c in commands), commands
    pinned = {c.split("OMP_NUM_THREADS=")[1].split()[0] for c in commands}
    assert len(pinned) == 1, f"the commands pin different thread counts: {pinned}"
    nproc = {int(n) for c in commands for n in re.findall(r"--nproc_per_node (\d+)", c)}
    doctor = next(cell for cell in _markdown() if "--nproc_per_node 1" in cell)
    assert 1 in nproc and "then the same with `--nproc_per_node 2`" in doctor   # 1 against 2, alike
