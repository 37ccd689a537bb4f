"""The course's own machinery: what the notebooks use and a practitioner's run does not.

options (named options that refuse nonsense: the base of each case's
options) ; exercises (the self-checks that close every notebook) ; toy (the
small MLP notebook 00 and the tests train) ; replay (a recorded GPU run, or
the same run made live on this machine's GPUs) ; diagnosis_verdicts (a
lesson's verdicts on what `diagnose` said) ; timer_validation (the timer
checked against other clocks and its cost measured: benchmarks/) ; planted (a
workload with known causes, for checking `diagnose`: benchmarks/).
It imports the tool (`ddp_lessons.tool`), never a case.
"""
