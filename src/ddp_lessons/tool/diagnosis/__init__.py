"""Reading runs timed with `StepTimer`: what cost the time, and runs side by side.

measures (`RankMeasures`: one rank's totals) ; waits (`Waits`: each wait charged to what made the late
rank late) ; setting (world size, core budget, clock: what advice depends on) ; findings (each cause
decided, with its thresholds) ; communication (the all-reduce's findings and the script's own
collectives) ; host (host-bound GPU steps, from a busy share) ; advice (what to change, written for the
run) ; causes (the fixed vocabulary) ; report (`Diagnosis`, `Finding`) ; ranking (`diagnose(run)`) ;
side_by_side (`compare(runs)`: per-phase medians, throughput, speed-up and efficiency with the spread of
repeats) ; cli (`python -m ddp_lessons diagnose RECORD` and `compare RECORD ...`).
"""

from .causes import CAUSES
from .ranking import diagnose
from .report import Diagnosis, Finding
from .side_by_side import Comparison, compare

__all__ = ["diagnose", "compare", "Diagnosis", "Finding", "Comparison", "CAUSES"]
