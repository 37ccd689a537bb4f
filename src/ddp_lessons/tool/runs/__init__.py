"""A run as an object: every rank's `StepTimer` result, read through named accessors.

`Run(values)` takes what `launch`, `run` or `gather` returned (one value per rank: the timer's result
itself, or a dict holding it under "timer" beside the worker's own keys); `Run.load(name, setup=,
round=)` reads one run of a saved record, and `Record.load(name)` the whole record with its setups
and rounds. `diagnose`, `compare`, `whatif` and the plots take a `Run` (or anything `Run` takes).
`StepTimer.result()` stays the JSON wire format; `Rank` reads it once, into `Step`s, and nothing reads
the JSON after it. Defined in notebook 00_first_launch.

step (`Step`, `Bucket`: one timed step and its gradient buckets) ; rank (`Rank`: one rank's result,
`timer_of`) ; run (`Run`: every rank of one run, the waits across them; `Record`: a saved record's runs) ;
wire (`read`: a dataclass read once from a worker's own keys or a record's row).
"""

from .rank import KEY, NOT_DURATIONS, WARMUP, Rank, timer_of
from .run import Record, Run
from .step import Bucket, Step
from .wire import read

__all__ = ["Run", "Rank", "Record", "Step", "Bucket", "timer_of", "KEY", "NOT_DURATIONS", "WARMUP", "read"]
