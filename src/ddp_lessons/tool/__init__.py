"""The tool: what a practitioner imports to find out why their DDP run is slow.

Nothing here imports the course (`ddp_lessons.course`) or its cases. From the
ground up (tests/repo/test_architecture.py checks the order):

- runtime (what a worker asks about its run), paths (where data and records
  live), spread (statistics of repeated runs), ddp (the wrap, gradient bytes),
  hooks (comm hooks that change what DDP sends), kineto (the GPU's busy share
  in a profiler trace);
- verdict (a claim decided by interval against a limit), records (run records
  as JSON), launcher (start workers from a notebook, a script or torchrun;
  `gather` on rank 0), timing (`StepTimer`: every step of every rank, and the
  rest of its time), runs (`Run`: every rank's result, or a saved record's);
- allreduce (all-reduce over message sizes, its one cost model), commands
  (what every `python -m ddp_lessons` command shares);
- diagnosis (`diagnose`: what cost a run its time; `compare`: runs side by
  side), plots;
- predict (`whatif`: a recorded run's step on N ranks over a given link, a model), doctor (an
  unmodified script timed and diagnosed from its own command, its suspicions tried).
"""
