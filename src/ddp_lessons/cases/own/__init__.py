"""Notebook 07's workload: a learner's own run that is neither case.

A half-width ResNet-18-like CNN on CIFAR-shaped synthetic data, with the
habits a new user brings, and the fixes as options:

model · data · options (the habits and the fixes) · plan (options -> one
rank's objects) · train (the timed loop; interleaved rounds) · trace
(torch.profiler, exported for Perfetto and HTA) · cores (core budgeting) ·
readout (runs as numbers: times, costs by cause) · accumulate (no_sync) ·
unused (TORCH_DISTRIBUTED_DEBUG) · gpu (the recorded GPU run read back: NCCL
lines, Holistic Trace Analysis) · procedure (notebook 00's measurements walked
on one run) · verdicts · exercises.
"""

from ...course.contract import Case
from .options import Options

CASE = Case("own", "a learner's own run, diagnosed, fixed, and the standard tools on it",
            ("07_diagnose_your_own_run",), options=Options, worker="ddp_lessons.cases.own.train:train",
            claims="ddp_lessons.cases.own.verdicts", exercises="ddp_lessons.cases.own.exercises")

__all__ = ["CASE", "Options"]
