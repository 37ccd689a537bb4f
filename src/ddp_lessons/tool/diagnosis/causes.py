"""The fixed vocabulary of causes `diagnose` reports, what to change for each,
and how to check the change. Keys are stable (code and tests use them)."""

from __future__ import annotations

OUTSIDE = "outside_steps"
WAITING = "waiting_for_slower_rank"
EXPOSED = "exposed_allreduce"
LATENCY = "latency_bound_allreduce"
DATA = "data_loading"
HOST = "host_bound_steps"
STARTUP = "startup"
ACCUMULATION = "allreduce_every_micro_step"
LAST_BUCKET = "last_bucket_exposed"

CAUSES = {
    OUTSIDE: ("work outside the steps",
              "if every rank does the same work (e.g. each evaluates the whole test set), split it "
              "(DistributedSampler on the test set, all-reduce the metric) or do it on one rank and "
              "let the others skip it; do checkpointing and logging on rank 0 only, and less often",
              "time the same block with timer.outside(name) again: its seconds per rank should "
              "drop about world-size-fold (split) or to ~0 on the other ranks; compare() the epochs"),
    WAITING: ("ranks waiting for a slower rank",
              "give every rank the same work: the same number and size of batches (DistributedSampler, "
              "drop_last), the same extra work (evaluation, logging, checkpoints on one rank make the "
              "others wait at the next all-reduce), the same cores and threads",
              "per step, `wait` should fall on every rank, and the slowest rank's step time should "
              "stay the same"),
    EXPOSED: ("exposed all-reduce",
              "overlap more of it with the backward pass (smaller bucket_cap_mb, so buckets leave "
              "earlier), send fewer bytes (a bf16/fp16 compression hook, no unused parameters), or "
              "communicate less often (gradient accumulation with no_sync)",
              "per step, `exposed` minus `wait` should fall; the step time with it"),
    LATENCY: ("latency-bound all-reduce: the step's compute is small",
              "give each all-reduce more work to pay for: a larger per-rank batch, gradient "
              "accumulation with no_sync (one all-reduce per several batches), fewer larger buckets; "
              "or train this model on one process (more ranks cannot win when communicating costs "
              "more than computing)",
              "compare() samples/s against the 1-rank run: scaling should rise above 1; all-reduce "
              "calls per sample should fall"),
    DATA: ("data-loading wait",
           "prepare batches ahead: DataLoader num_workers > 0 (cores permitting), pin_memory on GPUs, "
           "persistent_workers, no per-sample work the loader could cache",
           "per step, `data` should fall to near 0"),
    HOST: ("host-bound steps",
           "take per-step host work out of the loop: no loss.item()/print/sync every step (log every "
           "N steps, keep the loss on the device), no untimed Python between steps; on GPUs, fewer "
           "kernel launches (torch.compile, CUDA graphs)",
           "the unattributed time between steps and the steps' remainder should fall"),
    ACCUMULATION: ("gradient accumulation without no_sync: an all-reduce every micro-step",
                   "run every micro-step but the last of each optimizer step inside `with ddp_model.no_sync():` "
                   "(the gradients add up locally; DDP all-reduces them once, in the last micro-step's backward)",
                   "steps without an optimizer phase should show 0 allreduce_calls; all-reduces per optimizer "
                   "step should fall to one step's worth"),
    LAST_BUCKET: ("the last bucket's all-reduce is exposed",
                  "a smaller bucket_cap_mb cannot help here: a bucket holds whole tensors and this one is ready "
                  "only when the backward ends (a parameter used first in the forward, such as an input or "
                  "tied embedding, gets its gradient last). Send fewer bytes (a bf16/fp16 compression hook "
                  "halves them), all-reduce less often (gradient accumulation with no_sync), or, where the "
                  "bucket holds several parameters, a cap below its size splits it",
                  "per step, the last bucket's exposed time (its end minus its ready time, in `buckets`) "
                  "should fall; the step time with it"),
    STARTUP: ("start-up (once per launch)",
              "start once and train longer per launch; import and build before the timed part only "
              "what is needed; on CPUs, keep loader workers persistent",
              "account['startup'] + account['before_first_step'] against the run's length"),
}


def label(cause: str) -> str:
    return CAUSES[cause][0]
