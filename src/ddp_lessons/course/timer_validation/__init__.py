"""The timer checked against other clocks, and what it costs.

Notebook 00 reads the records these make (benchmarks/timer_validation.py,
benchmarks/timing_overhead.py):

overhead (benchmarks/timing_overhead.py's worker: one DDP loop, timed or
not) ; bench (benchmarks/timer_validation.py's paired cost rounds) ; agree
(the timer against the profiler's kernels and DDP's own timings) ; validate
(that benchmark's worker, whole) ; check (a validation record read back:
`validation_summary`, defined in notebook 00_first_launch).
"""
