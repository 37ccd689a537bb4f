"""Reading runs timed with `StepTimer`: what cost the time, and runs side by side.

inputs (what a run is: per-rank timer results, or a record) ; causes (the
fixed vocabulary, with what to change and how to check) ; findings (the
rules and their thresholds) ; report (the `Diagnosis` and `Finding` it
prints) ; diagnose (`diagnose(results)`) ; compare (`compare(runs)`: per-phase
medians, throughput and scaling with the spread of repeats, and verdicts) ;
claims (verdicts on a diagnosis: what it ranks first, names, no longer names).
"""

from . import claims
from .causes import CAUSES
from .compare import Comparison, compare
from .diagnose import diagnose
from .report import Diagnosis, Finding

__all__ = ["diagnose", "compare", "Diagnosis", "Finding", "Comparison", "CAUSES", "claims"]
