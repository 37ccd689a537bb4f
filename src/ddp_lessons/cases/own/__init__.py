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

from .options import Options

__all__ = ["Options"]
