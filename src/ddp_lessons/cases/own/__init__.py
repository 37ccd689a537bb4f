"""Notebook 07's case: a learner's own run, diagnosed, fixed, and the standard tools on it.

A quarter- to half-width ResNet-18-like CNN on CIFAR-shaped synthetic data, with a new user's habits
and the fixes as options. The skeleton: options (the habits and the fixes) · plan (options -> one
rank's objects) · train (the timed loop; interleaved rounds) · readout (the rounds as a `Record`,
run times, costs by cause) · claims (07's verdicts) · exercises · cli (`python -m ddp_lessons own`).
Its own: model · data · trace (torch.profiler, for Perfetto and HTA) · gpu (the recorded H200 run's
NCCL lines and Holistic Trace Analysis) · standalone (a plain DDP script for the doctor) · cores (core
budgeting) · accumulate (no_sync) · unused (TORCH_DISTRIBUTED_DEBUG).

The names notebook 07 calls are here: its own, and the tool's `plots`, which `ddp_lessons` does not
export (the figures need matplotlib).
"""

from ...course.contract import Case
from . import accumulate, cores, gpu, readout, standalone, train, unused
from .claims import CLAIMS
from .model import SmallResNet, parameter_count
from .options import Options

CASE = Case("own", "a learner's own run, diagnosed, fixed, and the standard tools on it",
            ("07_diagnose_your_own_run",),
            commands={"own": "ddp_lessons.cases.own.cli:cli_command"})


def __getattr__(name):
    # the tool's figures, loaded when the notebook first asks (the command line does not need them)
    if name == "plots":
        from ...tool import plots
        return plots
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CASE", "CLAIMS", "Options", "SmallResNet", "parameter_count", "accumulate", "cores", "gpu",
           "readout", "standalone", "train", "unused"]
