"""What to change, written for the run at hand: each function reads the run's setting (world size,
the core budget, the link's cost per call) and what the timer saw (the loader, the buckets and their
tensors) and returns one plain sentence or two, never two that contradict each other."""

from __future__ import annotations

MIB = 2 ** 20
DEFAULT_CAP = 25 * MIB    # torch's bucket_cap_mb default


def outside(world: int, own: list, waited: list) -> tuple[str, bool]:
    """(change, needs the user's code) for work outside the steps: `own` its seconds on each rank,
    `waited` the others' waits for it."""
    if world <= 1:
        return ("it adds its seconds to the run as it is: do it less often or on fewer samples; on N ranks, "
                "give each rank its shard of it (DistributedSampler on the test set, all-reduce the metric)"), True
    top = max(own)
    if top > 0 and min(own) <= 0.2 * top:   # one rank does (nearly) all of it
        if max(waited) >= 0.5 * top:
            return ("one rank does it while the others wait for it at their next all-reduce: doing it on one rank "
                    "is what makes them wait; give each rank its shard of it instead (DistributedSampler on the "
                    "test set, all-reduce the metric), or do it less often"), True
        return ("one rank does it, and the others did not wait for it (they had other work): do it less often, "
                "or give each rank its shard of it"), True
    if max(own) <= 1.5 * min(own):
        return (f"every rank spends as long on it: if each does the whole of it (its loader has no "
                f"DistributedSampler) it is done {world} times over, so give each rank its shard (all-reduce the "
                "metric); if each does its shard already, do it less often"), True
    return "it is uneven across ranks: give every rank the same share of it, or do it less often", True


def data(setting, loader: dict | None, gpu: bool) -> str:
    """The data wait, from the core budget: workers only where cores are spare."""
    workers = (loader or {}).get("num_workers") or 0
    spare = setting.spare
    once = "do the per-sample work once (decode or transform ahead and cache it) or more cheaply"
    if gpu:
        once += ", or move the transform to the GPU"
    if spare is not None and spare <= 0:
        head = f"no core is spare ({setting.core_line()}): loader workers would take cycles from the ranks"
        if workers:
            return f"{head}, and its {workers} worker(s) already do: {once}; fewer workers, not more"
        return f"{head}, so workers will not help: {once}"
    room = f" ({spare} spare core(s): {setting.core_line()})" if spare is not None else ""
    if loader is None:   # not a DataLoader, or iterated another way: its workers are unknown
        return (f"the loader was not seen: if it prepares batches in the training process, prepare them ahead "
                f"(DataLoader num_workers > 0 within the spare cores{room}); if it has workers already, {once}")
    if workers:
        return (f"the loader already has {workers} worker(s){room}: {once}, or more workers if cores allow; "
                "persistent_workers=True" + (", pin_memory=True" if gpu else ""))
    return (f"prepare batches ahead: DataLoader num_workers > 0 within the spare cores{room}, persistent_workers="
            f"True{', pin_memory=True' if gpu else ''}; or {once}")


def small_buckets(cap: int | None, count: float, median_bytes: float, total: float) -> str:
    at_default = int(total // DEFAULT_CAP) + 2
    capped = f"bucket_cap_mb={cap / MIB:.3g}" if cap else "a small bucket_cap_mb"
    return (f"raise the bucket cap: {capped} makes {count:.0f} buckets of {median_bytes / 1024:.3g} KiB, each paying "
            f"the all-reduce's fixed cost; torch's default (25 MB) would make about {at_default}")


def split_cap(tensors: list | None, last_bytes: int) -> float | None:
    """The bucket_cap_mb that splits a late last bucket of several tensors (None: one tensor is most of it)."""
    if not tensors or max(tensors) >= 0.5 * last_bytes:
        return None
    return round(max(max(tensors), sum(tensors) / 2) / MIB, 2)


def _less_often(accumulating: bool) -> str:
    return ("" if accumulating else ", or all-reduce less often (accumulation with no_sync)")


def last_bucket(tensors: list | None, last_bytes: int, shared: bool = False, accumulating: bool = False) -> str:
    """A late last bucket: whether a cap helps depends on the tensor it waits for, and on a core being
    free to overlap its earlier tensors' all-reduce on (accumulation: not advised where the run has it)."""
    fewer = "send fewer bytes (a bf16/fp16 compression hook where the backend reduces them, as NCCL does)"
    less = _less_often(accumulating)
    if not tensors:
        return (f"{fewer}{less}; whether a smaller cap helps depends "
                "on its tensors, which this result does not hold (mode 'full' records them)")
    big = max(tensors)
    if big >= 0.5 * last_bytes:
        return (f"no bucket cap helps: one tensor of {big / MIB:.3g} MiB is most of it and is ready only at the "
                f"backward's end (a parameter used first in the forward: an input or tied embedding); {fewer}{less}")
    if shared:
        return (f"it holds several tensors, but splitting it would not overlap here (the ranks share cores): "
                f"{fewer}{less}")
    return (f"a bucket_cap_mb below its {last_bytes / MIB:.3g} MiB (about {split_cap(tensors, last_bytes):g}) "
            f"splits it, so its earlier tensors leave during the backward; or {fewer}")


def split_one(grad_bytes: int | None) -> float | None:
    """The cap that puts a gradient of over 8 MiB in about 4 buckets of over 2 MiB each (None: too small
    for buckets to pay their own fixed cost)."""
    return round(grad_bytes / 4 / MIB, 1) if grad_bytes and grad_bytes > 8 * MIB else None


def exposed(buckets, cap: int | None, grad_bytes: int | None, shared: bool,
            accumulating: bool = False) -> str:
    """The exposed transfer: where the whole gradient is one bucket on a machine with a core to overlap
    on, a cap that gives a few buckets of over 2 MiB; otherwise fewer bytes or less often (where the run
    does not accumulate already)."""
    fewer = ("send fewer bytes (a bf16/fp16 compression hook where the backend reduces them; no unused "
             "parameters)" + (" or all-reduce less often (accumulation with no_sync)" if not accumulating else ""))
    if buckets and buckets.count == 1 and cap:
        split = split_one(grad_bytes)
        if shared or split is None:   # no core to overlap on, or buckets too small to pay their way
            return (f"the whole gradient goes in one bucket, and splitting it would not overlap here ("
                    f"{'the ranks share cores' if shared else 'it is too small'}): {fewer}")
        return (f"the whole gradient goes in one bucket (cap {cap / MIB:.3g} MB): bucket_cap_mb={split:g} gives "
                f"about 4 buckets that leave during the backward; or {fewer}")
    return fewer


def imbalance(slower: int, gap: dict) -> str:
    """Where the slower rank's extra time is says what to look at: in its data wait or forward, uneven
    batches; in the optimizer step alone (the same work on every rank by construction), or in every
    phase alike, the rank's device or cores."""
    phase = max(gap, key=lambda k: gap[k]) if gap else None
    if phase is None or gap[phase] <= 0:
        return f"rank {slower} computes more per step: give every rank the same work, the same cores and threads"
    where = f"rank {slower} computes more per step, most in {phase!r}"
    spread = sum(v > 0.25 * gap[phase] for v in gap.values()) >= 3
    if phase in ("data", "forward") and not spread:
        return (f"{where}: give every rank the same work (the same number and size of batches: "
                "DistributedSampler, drop_last, equal sequence lengths)")
    return (f"{where}{' and in every phase alike' if spread else ''}: the optimizer's work is the same on every "
            "rank, so look at the rank itself: its device's clocks and throttling (nvidia-smi -q -d PERFORMANCE), "
            "a process sharing its cores, its NUMA placement (taskset, numactl)")


def threads(host, n: int) -> str:
    return (f"give the ranks {n} torch thread(s) each ({host.cores} cores over {host.ranks} ranks): "
            f"torch.set_num_threads({n}) in each rank before any compute, or OMP_NUM_THREADS={n} in its "
            "environment (torchrun sets 1 when it starts several ranks; mp.spawn and a plain python do not)")


def evaluation(world: int, sharded: bool) -> str:
    if sharded:
        return "each rank evaluates its shard already (a DistributedSampler): do it less often, or on fewer samples"
    return (f"each rank evaluates the whole set (its loader has no DistributedSampler): it is done {world} times over; "
            f"a DistributedSampler on it and the metric all-reduced saves about {1 - 1 / world:.0%} of it")


def loader_start(loader: dict, start_method: str | None, why: str = "") -> str:
    """A loader's workers starting (and stopping), at every pass over it."""
    if why.startswith("its") and "over the" in why:
        out = (f"{why}: each pass starts them again beside the ranks, which need every core; fewer workers (none, "
               "where no core is spare), and the per-sample work done once or more cheaply")
    else:
        out = ("its workers start at every pass over the loader: persistent_workers=True starts them once; fewer "
               "workers start sooner")
    if start_method in ("spawn", "forkserver"):
        out += ("; the ranks were spawned, so their loaders spawn their workers too, each importing torch: "
                "DataLoader(multiprocessing_context='fork') starts them in a fraction of that where the rank "
                "has not touched CUDA")
    return out


def latency(accumulating: bool) -> str:
    return ("give each all-reduce more work to pay for: a larger per-rank batch, fewer larger buckets"
            + ("" if accumulating else ", accumulation with no_sync") + "; or train this model on one process")


def contention(setting) -> str:
    if setting.shared:
        return ("the ranks share cores: each all-reduce waits for cycles its peers and their threads take; give "
                "each rank its own cores (fewer threads per rank, or fewer ranks than cores)")
    return ("the calls wait for something else than the link: a slower peer each time (see the waits), or "
            "threads competing with the communication's own; a profiler window shows which")


def jitter(shared: bool) -> str:
    if shared:
        return ("the ranks share cores: the late rank changes from step to step as they take cycles from each other; "
                "give each rank its own cores (fewer threads per rank, or fewer ranks than cores)")
    return ("the late rank changes from step to step: look for variable batch sizes or lengths, garbage "
            "collection, or clocks and throttling on one device")


# The changes that do not depend on the run: one sentence each.
FIXED = {
    "host_bound": "give the GPU more work per launch: a larger per-rank batch, torch.compile or CUDA graphs (fewer "
                  "kernel launches), no host sync in the step (loss.item() or print every step: log every N steps)",
    "untimed": "find what runs there (StepTimer's phases, or a profiler window, name it): per-step host work such as "
               "loss.item() and a print every step is the usual one; log every N steps",
    "accumulation": "run every micro-step but the last of each optimizer step inside `with ddp_model.no_sync():` (or "
                    "set `ddp_model.require_backward_grad_sync = False` for them): the gradients add up locally and "
                    "DDP all-reduces them once, in the last micro-step's backward",
    "collectives": "call them less often: Lightning's self.log(..., sync_dist=True) all-reduces at every call (log "
                   "on_epoch, or sync every N steps); a metric's sync at the epoch's end (torchmetrics: compute() "
                   "once); no barrier in the loop",
    "startup": "paid once per launch: start once and train longer per launch; import and build before the loop only "
               "what is needed",
}
