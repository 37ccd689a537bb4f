"""One GPU's real levers on case 2's step (notebook 06; benchmarks/case2_levers.py).

catalog (each lever as a step function: the posted step, the fastest eager
step, a CUDA graph, ...) ; rounds (every lever timed in interleaved rounds,
saved as one run record).
"""

from . import rounds
from .catalog import (CUDA_ONLY, LEVERS, TIMING, Shapes, Skipped, default_config, make_batches, make_step, medians,
                    one_rank_group, time_steps)

__all__ = ["rounds", "CUDA_ONLY", "LEVERS", "TIMING", "Shapes", "Skipped", "default_config", "make_batches",
           "make_step", "medians", "one_rank_group", "time_steps"]
