"""What only the benchmarks use: the planted workload (`planted`, for planted_causes.py) and the
timer's validation against other clocks (`timer_bench`, the worker; `timer_agree`, the comparisons;
`timer_validate`, the run); the knobs workload's command and interleaved rounds (`rounds`, for
doctor_cost.py and planted_knobs.py). Benchmarks put this folder's parent on the path (`import benchlib`)."""
