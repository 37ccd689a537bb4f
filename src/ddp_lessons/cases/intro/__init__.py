"""Notebook 00's workers: a first all-reduce, a failing rank, a small timed
DDP model (`workers`), the timer-overhead loop (`overhead`), the foundation's
commands (`cli`) and the notebook's exercises."""
