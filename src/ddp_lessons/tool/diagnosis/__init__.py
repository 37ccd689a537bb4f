"""Reading runs timed with `StepTimer`: what cost the time, and runs side by side.

inputs (what a run is: per-rank timer results, or a record) ; causes (the
fixed vocabulary, with what to change and how to check) ; rules (each
cause's measure and threshold) ; report (the `Diagnosis` and `Finding` it
prints) ; ranking (`diagnose(results)`) ; side_by_side (`compare(runs)`:
per-phase medians, throughput and scaling with the spread of repeats, and
a verdict per run).
"""

from .causes import CAUSES
from .ranking import diagnose
from .report import Diagnosis, Finding
from .side_by_side import Comparison, compare

__all__ = ["diagnose", "compare", "Diagnosis", "Finding", "Comparison", "CAUSES"]
