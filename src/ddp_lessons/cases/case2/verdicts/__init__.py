"""Case 2's verdicts, each decided by the numbers a notebook measured.

runs (04-05: the Lightning runs and their timing, and the recorded GPU pairs) ; breakeven (06: N GPUs
against one, from the break-even model and the levers). Each verdict is worded: its sentence names
the setup and the machine for every outcome. A notebook calls them as `verdicts.NAME`.
"""

from .runs import (reused_processes, one_device_vs_forked, startup_vs_fit, expected_syncs, syncs_per_epoch,
                   hook_vs_standalone, bytes_vs_latency, diagnose_ranks_startup_first, randn_loader,
                   log_every_step, ratio_figure, per_round, spread_line, nvml_in_training_step, nvml_in_step,
                   nvml_added, posted_vs_fixed, machine, POST_EPOCHS, KEYS)
from .breakeven import below_ceiling, faster_step, gpus_win

__all__ = ["reused_processes", "one_device_vs_forked", "startup_vs_fit", "expected_syncs", "syncs_per_epoch",
           "hook_vs_standalone", "bytes_vs_latency", "diagnose_ranks_startup_first", "randn_loader",
           "log_every_step", "ratio_figure", "per_round", "spread_line", "nvml_in_training_step", "nvml_in_step",
           "nvml_added", "posted_vs_fixed", "machine", "POST_EPOCHS", "KEYS", "below_ceiling", "faster_step",
           "gpus_win"]
