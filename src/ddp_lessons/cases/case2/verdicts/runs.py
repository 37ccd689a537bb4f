"""Case 2's claims about its own runs (notebooks 04 and 05): each a function of
the run's numbers (plain lists and dicts) that returns a `verdict.Verdict`,
which could have come out the other way. The notebook prints it; the text
after it says only what it supports. The last part reads the recorded GPU
pairs (`case2-h200-pairs`: posted / fixed, NVML on / off, interleaved rounds on
one GPU at world size 1, so no byte crosses between GPUs) and the standalone
NVML figure (`case2-h200-nvml`). The per-rank reading of the all-reduce hook
is `hook_intervals`.

Defined in notebooks 04_case2_lightning and 05_case2_where_time_goes.
"""

from __future__ import annotations

import math
import statistics

from ....tool import verdict as V

POST_EPOCHS = 200  # the post's max_epochs


# -- 04: who starts the processes, and who wins --------------------------------------
def reused_processes(ranks: list[dict], kernel_pid: int) -> V.Verdict:
    """Under the launcher, Lightning started no process and kept the launcher's
    process group: counted over the ranks that say so (every one must). Defined in notebook 04_case2_lightning."""
    ok = [r for r in ranks if r["ppid"] == kernel_pid and r["external"] and r["same_group"]
          and not r.get("children")]
    return V.exact("Lightning reused the launcher's processes and process group on every rank",
                   len(ok), expected=len(ranks), what="ranks passing all four checks",
                   numbers={"checks": "parent is this kernel, processes created externally, "
                            "same process group, no process of their own"})


def one_device_vs_forked(one_s, forked_s) -> V.Verdict:
    """One device against three workers forked by `ddp_notebook`, timed in the
    same interleaved rounds (each from the call to its return): the claim is
    that one device takes less time. Decided on the two sides' quartiles
    (`verdict.separated`): on two shared cores one round in six can be hit by
    a busy moment of the machine, which a sign test over rounds would not survive.
    Defined in notebook 04_case2_lightning."""
    return V.separated("one device takes less time than three forked workers (same epochs, "
                    "Lightning setup in both, fork and rendezvous in the second)",
                    forked_s, one_s, faster="b", names=("3 forked", "1 device"))


def startup_vs_fit(startup_s: float, fit_walls, factor: float = 2.0) -> V.Verdict:
    """Starting spawned workers (everything the parent waited for beyond the
    slowest rank's `trainer.fit`) against each rank's fit: the claim is that the
    start-up takes more than `factor` times as long as the fit, on every rank.
    The start-up is measured once; `factor` leaves room for its spread. Defined in notebook 04_case2_lightning."""
    ratios = [startup_s / w for w in fit_walls]
    return V.interval(f"starting the spawned workers takes more than {factor:g}x as long as "
                      "their whole fit", min(ratios), max(ratios), side=">", limit=factor,
                      what="start-up / fit, per rank (min .. max)",
                      numbers={"start-up": V._fmt(startup_s, "s"),
                               "fit per rank": ", ".join(V._fmt(w, "s") for w in fit_walls)})


# -- 05: the all-reduce ---------------------------------------------------------------
def expected_syncs(samples_per_rank: int, batch_size: int, accumulate: int) -> tuple[int, int]:
    """(micro-steps, optimizer steps) per epoch and rank: Lightning steps on every
    `accumulate`-th micro-step and on the epoch's last one."""
    micro = math.ceil(samples_per_rank / batch_size)
    return micro, math.ceil(micro / accumulate)


def syncs_per_epoch(calls_per_step, samples_per_rank: int, batch_size: int,
                    accumulate: int) -> V.Verdict:
    """The all-reduce calls one rank made in one epoch (`calls_per_step`, one entry
    per micro-step) against what accumulation predicts: one per optimizer step.
    Defined in notebook 05_case2_where_time_goes."""
    micro, steps = expected_syncs(samples_per_rank, batch_size, accumulate)
    calls = list(calls_per_step)
    return V.exact(f"with accumulate_grad_batches={accumulate}, DDP all-reduces once per optimizer "
                   "step, not once per micro-step", (len(calls), sum(calls)), expected=(micro, steps),
                   what="(micro-steps, all-reduce calls) in an epoch")


def hook_vs_standalone(first_in_s: float, standalone_s: float, standalone_best_s: float,
                       factor: float = 2.0) -> V.Verdict:
    """Per step, the longest hook interval over the ranks (the rank that handed
    its bucket over first: the wire plus the wait for the last peer; median over
    steps) against the same all-reduce alone (the sweep's latency-bandwidth
    fits over its median and over its best times, at this size, bracketing the
    wire time; a fit pools every size, so one disturbed size moves it little):
    the claim is that it
    is more than `factor` times the wire time, i.e. that rank spends most of
    its interval waiting. Defined in notebook 05_case2_where_time_goes."""
    lo, hi = sorted((first_in_s / standalone_s, first_in_s / standalone_best_s))
    return V.interval(f"per step, the first rank to hand over its bucket spends most of its hook interval "
                      f"waiting: the interval is more than {factor:g}x the same all-reduce alone", lo, hi,
                      side=">", limit=factor, what="first rank's interval / standalone (median .. best)",
                      numbers={"first rank's interval": V._fmt(first_in_s * 1e3, "ms"),
                               "standalone median, best": f"{V._fmt(standalone_s * 1e3, 'ms')}, "
                                                          f"{V._fmt(standalone_best_s * 1e3, 'ms')}"})


def bytes_vs_latency(fits, nbytes: int, factor: float = 8.0) -> V.Verdict:
    """At `nbytes`, the model time = latency + bytes / bandwidth. From several
    fits (e.g. on the sweep's median times and on its best ones): the claim is
    that neither term is negligible, each more than 1/`factor` of the other in
    every fit. Does not hold when every fit puts one term beyond `factor` times
    the other (latency-bound or bandwidth-bound). Defined in notebook 05_case2_where_time_goes."""
    ratios = [nbytes / f["bandwidth"] / f["latency"] if f["latency"] > 0 else math.inf for f in fits]
    lo, hi = min(ratios), max(ratios)
    what = (f"bytes term / latency term, {len(fits)} fits (min .. max)" if len(fits) > 1
            else "bytes term / latency term")
    parts = (V.interval("not latency-bound", lo, hi, side=">", limit=1 / factor, what=what),
             V.interval("not bandwidth-bound", lo, hi, side="<", limit=factor, what=what))
    status = V.all_of("both", *parts).status
    return V.Verdict(f"at {nbytes / 1e6:.2f} MB neither the latency nor the bytes/bandwidth term is "
                     f"negligible: each is more than 1/{factor:g} of the other", status,
                     {what: f"{V._fmt(lo)} .. {V._fmt(hi)}"},
                     f"holds when every ratio is within [1/{factor:g}, {factor:g}], does not hold when "
                     "all of them are beyond one end, else not resolvable")


# -- 05: start-up against the all-reduces, as a function of the epochs --------------------
def crossover_epochs(startup_s, allreduce_per_epoch_s) -> list[float]:
    """Per rank: the epoch count at which the run's all-reduces add up to its start-up.
    Defined in notebook 05_case2_where_time_goes."""
    return [s / a if a > 0 else math.inf for s, a in zip(startup_s, allreduce_per_epoch_s, strict=True)]


def startup_vs_allreduce(startup_s, allreduce_per_epoch_s, epochs: int, factor: float = 3.0) -> V.Verdict:
    """Per rank, start-up (process start, imports, rendezvous, Lightning setup)
    against `epochs` x that rank's all-reduce time per epoch: the claim is that the
    start-up costs more than `factor` times all the all-reduces of an `epochs`-epoch run.
    Defined in notebook 05_case2_where_time_goes."""
    ratios = [s / (epochs * a) if a > 0 else math.inf for s, a in zip(startup_s, allreduce_per_epoch_s, strict=True)]
    cross = crossover_epochs(startup_s, allreduce_per_epoch_s)
    what = f"{factor:g}x all the all-reduces" if factor != 1 else "all the all-reduces"
    return V.interval(f"at {epochs} epochs, start-up costs more than {what}",
                      min(ratios), max(ratios), side=">", limit=factor,
                      what="start-up / all-reduces, per rank (min .. max)",
                      numbers={"crossover (start-up = all-reduces), per rank":
                               f"{V._fmt(min(cross))} .. {V._fmt(max(cross))} epochs"})


# -- 05: data drawn per item, logging every step ---------------------------------------
def randn_loader(randn_s, tensor_s) -> V.Verdict:
    """One pass of the loader, `torch.randn` per item against tensors made once,
    in the same interleaved rounds: the claim is that tensors are faster,
    decided on the per-round ratios (`verdict.paired`). The rounds are paired
    (each round alternates the two setups' passes), so a round's ratio does not
    move when the whole machine slows between rounds; comparing the two setups'
    quartiles unpaired did, and flipped on a quiet 2-core machine. Defined in notebook 05_case2_where_time_goes."""
    return V.paired("a loader pass over tensors made once takes less time than one that draws "
                    "torch.randn per item", randn_s, tensor_s, faster="b", names=("randn", "tensors"))


def log_every_step(every_s, rare_s) -> V.Verdict:
    """`training_step` (median per fit) with `self.log` every step against every
    50th, in the same interleaved rounds: the claim is that logging rarely is faster,
    decided on the per-round ratios (`verdict.paired`, as `randn_loader`).
    Defined in notebook 05_case2_where_time_goes."""
    return V.paired("training_step takes less time with self.log every 50th step than every step",
                    every_s, rare_s, faster="b", names=("every step", "every 50th"))


# -- 05: the recorded GPU pairs ---------------------------------------------------------
KEYS = {"step": "median micro-step time", "training_step": "median training_step time",
        "wall": "fit time"}


def per_round(rec: dict, name: str, key: str) -> list[float | None]:
    """Variant `name`'s value in each round of a pairs record, in round order
    (None for a failed run). `key`: 'step' (its median micro-step after warm-up),
    'training_step' (median of the forward phase: the model, the loss, self.log,
    the NVML block when on) or 'wall' (trainer.fit, seconds). Defined in notebook 05_case2_where_time_goes."""
    if key not in KEYS:
        raise ValueError(f"key={key!r}: use one of {sorted(KEYS)}")
    runs = [r for r in rec["results"]["runs"] if r["name"] == name]
    if not runs:
        names = sorted({r["name"] for r in rec["results"]["runs"]})
        raise ValueError(f"no variant {name!r} in this record: it has {names}")
    out = [None] * (1 + max(r["round"] for r in runs))
    for r in runs:
        if r.get("ok"):
            out[r["round"]] = (r["summary"]["median"] if key == "step" else
                               r["parts"]["forward"] if key == "training_step" else r["wall"])
    return out


def spread_line(values, unit_scale: float = 1e3, unit: str = "ms") -> str:
    """'median m (min .. max over n rounds)' of the rounds that ran. Defined in notebook 05_case2_where_time_goes."""
    v = [x * unit_scale for x in values if x is not None]
    return (f"median {statistics.median(v):.2f} {unit} ({min(v):.2f} .. {max(v):.2f} over {len(v)} rounds)"
            if v else "no round ran")


def nvml_in_training_step(rec: dict) -> V.Verdict:
    """NVML block every step against none (fixed test, Lightning): the claim is
    that `training_step` takes less time without it, in every round. Defined in notebook 05_case2_where_time_goes."""
    return V.paired("without the NVML block, training_step takes less time",
                    per_round(rec, "fixed-nvml", "training_step"), per_round(rec, "fixed", "training_step"),
                    faster="b", names=("NVML", "none"))


def nvml_in_step(rec: dict) -> V.Verdict:
    """The same pair on the whole micro-step (data wait, Lightning's loop,
    backward, optimizer too). Defined in notebook 05_case2_where_time_goes."""
    return V.paired("without the NVML block, the whole micro-step takes less time",
                    per_round(rec, "fixed-nvml", "step"), per_round(rec, "fixed", "step"),
                    faster="b", names=("NVML", "none"))


def nvml_added(rec: dict) -> list[float | None]:
    """Per round: what the NVML block added to training_step (s). Defined in notebook 05_case2_where_time_goes."""
    on, off = per_round(rec, "fixed-nvml", "training_step"), per_round(rec, "fixed", "training_step")
    return [None if a is None or b is None else a - b for a, b in zip(on, off, strict=True)]


def nvml_held_vs_fresh(res: dict) -> V.Verdict:
    """The block's calls where NVML is held open against those in a new process
    (`case2.nvml.costs`): the claim is that held, a call takes less time.
    Decided on the two sets of calls' quartiles. Defined in notebook 05_case2_where_time_goes."""
    return V.separated("with NVML held open the post's block takes less time per call than in a new process",
                       res["calls"], res["held"]["calls"], faster="b", names=("new process", "held"))


def nvml_below_standalone(rec: dict, per_call_s: float) -> V.Verdict:
    """What the block added to training_step, per round, against the standalone
    per-call figure of a process where nothing holds NVML open: the claim is
    that inside the fit it costs less than that figure says. Defined in notebook 05_case2_where_time_goes."""
    return V.repeats("inside the GPU fit the NVML block adds less to a step than the standalone "
                     "per-call figure (nothing holding NVML open)",
                     [x * 1e3 if x is not None else None for x in nvml_added(rec)],
                     side="<", limit=per_call_s * 1e3, what="added to training_step per round", unit="ms",
                     numbers={"standalone per call": V._fmt(per_call_s * 1e3, "ms")})


def posted_vs_fixed(rec: dict, key: str = "wall") -> V.Verdict:
    """The posted test against the fixed one (which also drops accumulation:
    an optimizer step on every micro-step): the claim is that the fixed one
    takes less time per fit, in every round. Defined in notebook 05_case2_where_time_goes."""
    return V.paired(f"the fixed test takes less time than the posted one ({KEYS[key]})",
                    per_round(rec, "posted", key), per_round(rec, "fixed", key),
                    faster="b", names=("posted", "fixed"))
