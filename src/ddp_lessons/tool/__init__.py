"""The tool: what a practitioner imports to find out why their DDP run is slow.

Nothing here imports the course (`ddp_lessons.course`) or its cases. From the
ground up (tests/test_architecture.py checks the order):

- runtime (what a worker asks about its run), paths (where data and records
  live), spread (statistics of repeated runs), ddp (the wrap, gradient bytes);
- verdict (a claim decided by interval against a limit), hooks (comm hooks
  that change what DDP sends), records (run records as JSON);
- launcher (start workers from a notebook, a script or torchrun), timing
  (`StepTimer`: every step of every rank, and the rest of its time);
- allreduce (all-reduce over message sizes, its one cost model), commands
  (what every `python -m ddp_lessons` command shares);
- diagnosis (`diagnose`: what cost a run its time; `compare`: runs side by
  side), plots;
- predict (`whatif`: a recorded run's step on N ranks over a given link, a model).
"""
