"""The fixed vocabulary of causes `diagnose` reports: a stable key, a label, and how to check a
change. What to change is not fixed here: it depends on the run (world size, cores per rank, the
buckets, the loader) and is written by `diagnosis.advice` for each finding."""

from __future__ import annotations

OUTSIDE = "outside_steps"
WAITING = "waiting_for_slower_rank"
JITTER = "rank_to_rank_jitter"
EXPOSED = "exposed_allreduce"
LATENCY = "latency_bound_allreduce"
SMALL_BUCKETS = "many_small_buckets"
LAST_BUCKET = "last_bucket_exposed"
ACCUMULATION = "allreduce_every_micro_step"
DATA = "data_loading"
HOST_BOUND = "host_bound_steps"
UNTIMED = "untimed_host_work"
STARTUP = "startup"
THREADS = "threads_over_cores"
COLLECTIVES = "script_collectives"
HOST = UNTIMED  # the name an earlier version used for untimed host work

CAUSES = {
    OUTSIDE: ("work outside the steps",
              "measure again: its seconds, and the others' waits for it, should fall"),
    WAITING: ("ranks waiting for a slower rank",
              "per step, `wait` should fall on the other ranks, and the slower rank's compute come down to theirs"),
    JITTER: ("rank-to-rank jitter",
             "per step, `wait` should fall on every rank"),
    EXPOSED: ("exposed all-reduce",
              "per step, `exposed` minus `wait` should fall; the step time with it"),
    LATENCY: ("latency-bound all-reduce: the step's compute is small",
              "compare() samples/s against the 1-rank run: the speed-up should rise; all-reduce calls per sample "
              "should fall"),
    SMALL_BUCKETS: ("many small gradient buckets",
                    "allreduce_calls per step should fall to a few, and the backward (with its all-reduces) get "
                    "shorter; `python -m ddp_lessons doctor --confirm` measures it"),
    LAST_BUCKET: ("the last bucket's all-reduce is exposed",
                  "per step, the last bucket's exposed time (its end minus its ready time, in `buckets`) should "
                  "fall; the step time with it"),
    ACCUMULATION: ("gradient accumulation without no_sync: an all-reduce every micro-step",
                   "micro-steps without an optimizer step should show 0 allreduce_calls; all-reduces per "
                   "optimizer step should fall to one step's worth"),
    DATA: ("data-loading wait",
           "per step, `data` should fall to near 0"),
    HOST_BOUND: ("host-bound GPU steps: the GPU waits for the host",
                 "a short torch.profiler window: the GPU's busy share of the step should rise"),
    UNTIMED: ("untimed host work in and between steps",
              "measure again: the time no phase covers should fall"),
    THREADS: ("more torch threads than cores: the ranks take turns",
              "the step time with the knob's threads against as it is (`doctor --confirm`); the waits that "
              "change rank from step to step should fall"),
    COLLECTIVES: ("collectives the script issues itself, every step",
                  "per step, `collectives` should fall (fewer calls: sync metrics at the epoch's end)"),
    STARTUP: ("start-up (once per launch)",
              "account['startup'] + account['before_first_step'] against the run's length"),
}


def label(cause: str) -> str:
    return CAUSES[cause][0]
