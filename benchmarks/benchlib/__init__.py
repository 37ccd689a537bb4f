"""What only the benchmarks use: the planted workload (`planted`, for planted_causes.py) and the
timer's validation against other clocks (`timer_bench`, the worker; `timer_agree`, the comparisons;
`timer_validate`, the run). Benchmarks put this folder's parent on the path (`import benchlib`)."""
