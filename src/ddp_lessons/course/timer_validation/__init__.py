"""The timer checked against other clocks, and what it costs: what the notebooks read of it.

overhead (benchmarks/timing_overhead.py's worker, made again live by
`cases.intro.train.overhead_results` through `course.replay`: one DDP loop,
timed or not) ; check (a validation record read back: `validation_summary`,
defined in notebook 00_first_launch). The benchmarks' own parts are in
benchmarks/benchlib.
"""
