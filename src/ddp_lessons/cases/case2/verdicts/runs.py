"""Case 2's claims about its runs (notebooks 04 and 05): each a function of the run's numbers (plain
lists and dicts) that returns a worded `verdict.Verdict`, which could have come out the other way; its
sentence names the setup and the machine (this one, or the recorded GPU: the pairs record
`case2-h200-pairs`, one GPU at world size 1, and the NVML figure `case2-h200-nvml`), for every outcome.
The per-rank reading of the all-reduce hook is `hook_intervals`.
Defined in notebooks 04_case2_lightning and 05_case2_where_time_goes.
"""

from __future__ import annotations

import math
import statistics

from ....tool import verdict as V
from ....tool.spread import quartiles

POST_EPOCHS = 200  # the post's max_epochs


def ratio_figure(a, b, label: str) -> str:
    """'label lo .. hi (n rounds)' of the per-round ratios b / a (rounds where both ran): the one
    short figure a paired verdict prints. Defined in notebook 05_case2_where_time_goes."""
    r = [y / x for x, y in zip(a, b) if x is not None and y is not None]  # noqa: B905 - one side may be empty
    return f"{label} {min(r):.2f} .. {max(r):.2f} ({len(r)} rounds)" if r else f"{label}: no paired round"


# -- 04: who starts the processes, and who wins --------------------------------------
def reused_processes(ranks: list[dict], kernel_pid: int) -> V.Verdict:
    """Under the launcher, Lightning started no process and kept the launcher's
    process group: counted over the ranks that say so (every one must). Defined in notebook 04_case2_lightning."""
    ok = [r for r in ranks if r["ppid"] == kernel_pid and r["external"] and r["same_group"]
          and not r.get("children")]
    v = V.exact("Lightning reused the launcher's processes and process group on every rank",
                len(ok), expected=len(ranks), what="ranks passing all four checks",
                numbers={"checks": "parent is this kernel, processes created externally, "
                         "same process group, no process of their own"})
    return V.worded(v, holds=f"On all {len(ranks)} ranks Lightning ran in the process the launcher started and kept "
                             "its process group: it started no process of its own.",
                    fails=f"On {len(ranks) - len(ok)} of {len(ranks)} ranks Lightning did not simply reuse the "
                          "launcher's process and process group: a check printed above is False.",
                    figure=f"{len(ok)} of {len(ranks)} ranks pass all four checks")


def one_device_vs_forked(one_s, forked_s, n: int = 3, cores: int | None = None) -> V.Verdict:
    """One device against `n` workers forked by `ddp_notebook`, timed in the
    same interleaved rounds (each from the call to its return): the claim is
    that one device takes less time. Decided on the two sides' quartiles
    (`verdict.separated`): on two shared cores one round in six can be hit by
    a busy moment of the machine, which a sign test over rounds would not survive.
    `cores`: this machine's cores; more workers than cores is said in the sentence (oversubscribed).
    Defined in notebook 04_case2_lightning."""
    v = V.separated(f"one device takes less time than {n} forked workers (same epochs, "
                    "Lightning setup in both, fork and rendezvous in the second)",
                    forked_s, one_s, faster="b", names=(f"{n} forked", "1 device"))
    over = f" ({n} workers on {cores} cores: oversubscribed)" if cores and n > cores else ""
    qa, qb = (quartiles([float(x) for x in xs if x is not None]) if len(xs) else None
              for xs in (forked_s, one_s))
    return V.worded(v, holds=f"On this machine one process finished the same fit sooner than {n} workers forked by "
                             f"ddp_notebook{over}, in the middle half of the rounds.",
                    fails=f"On this machine {n} workers forked by ddp_notebook{over} finished the same fit sooner "
                          "than one process, in the middle half of the rounds.",
                    unresolved=f"On this machine the rounds of one process and of {n} forked workers{over} overlap: "
                               "this run cannot tell which finished the fit sooner.",
                    figure=f"1 process / {n} forked {qb[0] / qa[2]:.2f} .. {qb[2] / qa[0]:.2f} (quartile bounds)"
                    if qa and qb else "too few rounds")


def startup_vs_fit(startup_s: float, fit_walls, factor: float = 2.0) -> V.Verdict:
    """Starting spawned workers (everything the parent waited for beyond the
    slowest rank's `trainer.fit`) against each rank's fit: the claim is that the
    start-up takes more than `factor` times as long as the fit, on every rank.
    The start-up is measured once; `factor` leaves room for its spread. Defined in notebook 04_case2_lightning."""
    ratios = [startup_s / w for w in fit_walls]
    n = len(ratios)
    v = V.interval(f"starting the spawned workers takes more than {factor:g}x as long as "
                   "their whole fit", min(ratios), max(ratios), side=">", limit=factor,
                   what="start-up / fit, per rank (min .. max)",
                   numbers={"start-up": V._fmt(startup_s, "s"),
                            "fit per rank": ", ".join(V._fmt(w, "s") for w in fit_walls)})
    return V.worded(v, holds=f"On this machine starting the {n} spawned workers took more than {factor:g}x their "
                             "whole fit: the launched run's total is mostly start-up, not training.",
                    fails=f"On this machine starting the {n} spawned workers took less than {factor:g}x their "
                          "fit on every rank: the launched run's total is not mostly start-up.",
                    unresolved=f"On this machine start-up is about {factor:g}x the fit: some ranks above, "
                               "some below, so this run cannot tell whether the total is mostly start-up.",
                    figure=f"start-up / fit {min(ratios):.1f} .. {max(ratios):.1f}x per rank")


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
    v = V.exact(f"with accumulate_grad_batches={accumulate}, DDP all-reduces once per optimizer "
                "step, not once per micro-step", (len(calls), sum(calls)), expected=(micro, steps),
                what="(micro-steps, all-reduce calls) in an epoch")
    return V.worded(v, holds=f"With accumulate_grad_batches={accumulate}, this Lightning all-reduced once per "
                             f"optimizer step: {steps} of an epoch's {micro} micro-steps, not every one.",
                    fails=f"With accumulate_grad_batches={accumulate}, this Lightning all-reduced on {sum(calls)} of "
                          f"{len(calls)} micro-steps, not once per optimizer step ({steps} of {micro}).",
                    figure=f"{sum(calls)} all-reduces in {len(calls)} micro-steps (expected {steps} in {micro})")


def hook_vs_standalone(first_in_s: float, standalone_s: float, standalone_best_s: float,
                       factor: float = 2.0) -> V.Verdict:
    """Per step, the longest hook interval over the ranks (the rank that handed
    its bucket over first: the wire plus the wait for the last peer; median over
    steps) against the same all-reduce alone (the sweep's latency-bandwidth
    fits over its median and over its best times, at this size, bracketing the
    wire time; a fit pools every size, so one disturbed size moves it little):
    the claim is that it is more than `factor` times the wire time, i.e. that rank
    spends most of its interval waiting. Defined in notebook 05_case2_where_time_goes."""
    lo, hi = sorted((first_in_s / standalone_s, first_in_s / standalone_best_s))
    v = V.interval(f"per step, the first rank to hand over its bucket spends most of its hook interval "
                   f"waiting: the interval is more than {factor:g}x the same all-reduce alone", lo, hi,
                   side=">", limit=factor, what="first rank's interval / standalone (median .. best)",
                   numbers={"first rank's interval": V._fmt(first_in_s * 1e3, "ms"),
                            "standalone median, best": f"{V._fmt(standalone_s * 1e3, 'ms')}, "
                                                       f"{V._fmt(standalone_best_s * 1e3, 'ms')}"})
    return V.worded(v, holds=f"On this machine the rank that hands its bucket over first spends most of its hook "
                             f"interval waiting for its peers: the interval is over {factor:g}x the same "
                             "all-reduce alone.",
                    fails=f"On this machine even the longest hook interval is under {factor:g}x the same all-reduce "
                          "alone: at most half of it is waiting for peers.",
                    unresolved=f"On this machine the longest hook interval is about {factor:g}x the all-reduce alone: "
                               "this run cannot tell whether most of it is waiting.",
                    figure=f"longest interval / all-reduce alone {lo:.1f} .. {hi:.1f}x")


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
    mb = f"{nbytes / 1e6:.2f} MB"
    v = V.Verdict(f"at {mb} neither the latency nor the bytes/bandwidth term is "
                  f"negligible: each is more than 1/{factor:g} of the other", status,
                  {what: f"{V._fmt(lo)} .. {V._fmt(hi)}"},
                  f"holds when every ratio is within [1/{factor:g}, {factor:g}], does not hold when "
                  "all of them are beyond one end, else not resolvable")
    bound = "latency-bound: the per-call latency" if hi < 1 / factor else "bandwidth-bound: the bytes"
    return V.worded(v, holds=f"On this machine both terms count at {mb}: latency and bytes are each more than "
                             f"1/{factor:g} of the other, so fewer calls and fewer bytes would each cut the wire time.",
                    fails=f"On this machine the all-reduce at {mb} is {bound} is over {factor:g}x the other term.",
                    unresolved=f"On this machine the fits disagree at {mb}: this run cannot tell whether one term "
                               "dominates the wire time.",
                    figure=f"bytes term / latency term {V._fmt(lo)}" + (f" .. {V._fmt(hi)}" if hi != lo else ""))


# -- 05: what diagnose ranks first -------------------------------------------------------
def diagnose_ranks_startup_first(posted: V.Verdict, fixed: V.Verdict) -> V.Verdict:
    """`diagnose` ranks start-up first for both the posted and the fixed test: the two
    `diagnosis_verdicts.ranks_first` verdicts, combined and worded. Defined in notebook 05_case2_where_time_goes."""
    a, b = (p.numbers.get("first finding", "nothing") for p in (posted, fixed))
    return V.worded(V.all_of("diagnose ranks start-up first for the posted and the fixed test", posted, fixed),
                    holds="On this machine diagnose puts start-up first for the posted test and for the fixed "
                          "one, as this notebook measured it first.",
                    fails=f"On this machine diagnose puts {a} first for the posted test and {b} for the fixed one: "
                          "not start-up in both.",
                    figure=f"first findings: {a} (posted), {b} (fixed)")


# -- 05: data drawn per item, logging every step ---------------------------------------
def randn_loader(randn_s, tensor_s) -> V.Verdict:
    """One pass of the loader, `torch.randn` per item against tensors made once,
    in the same interleaved rounds: the claim is that tensors are faster,
    decided on the per-round ratios (`verdict.paired`). The rounds are paired
    (each round alternates the two setups' passes), so a round's ratio does not
    move when the whole machine slows between rounds; comparing the two setups'
    quartiles unpaired did, and flipped on a quiet 2-core machine. Defined in notebook 05_case2_where_time_goes."""
    v = V.paired("a loader pass over tensors made once takes less time than one that draws "
                 "torch.randn per item", randn_s, tensor_s, faster="b", names=("randn", "tensors"))
    return V.worded(v, holds="On this machine a loader pass over tensors made once beat one that draws torch.randn "
                             "per item, in every round.",
                    fails="On this machine drawing torch.randn per item beat tensors made once, in every round.",
                    unresolved="On this machine the rounds disagree (or too few ran): this run cannot tell whether "
                               "tensors made once beat torch.randn per item.",
                    figure=ratio_figure(randn_s, tensor_s, "tensors / randn per round"))


def log_every_step(every_s, rare_s) -> V.Verdict:
    """`training_step` (the fastest of a fit) with `self.log` every step against every
    50th, in the same interleaved rounds: the claim is that logging rarely is faster,
    decided on the rounds' quartiles (`verdict.separated`): one or two rounds in which the
    machine took a core away for a whole fit do not decide it, as they did the sign test
    (a quiet CI run had one round at 1.00 among six at 0.49-0.79).
    Defined in notebook 05_case2_where_time_goes."""
    v = V.separated("training_step takes less time with self.log every 50th step than every step",
                    every_s, rare_s, faster="b", names=("every step", "every 50th"))
    return V.worded(v, holds="On this machine training_step took less time with self.log every 50th step than "
                             "every step: the middle halves of the rounds do not overlap.",
                    fails="On this machine training_step took less time with self.log every step than every 50th: "
                          "the middle halves of the rounds do not overlap.",
                    unresolved="On this machine the middle halves of the rounds overlap (or too few ran): this run "
                               "cannot tell whether logging every step costs training_step time.",
                    figure=f"every 50th / every step (quartile bounds) "
                           f"{v.numbers.get('every 50th/every step (quartile bounds)', 'n/a')}")


# -- 05: the recorded GPU pairs (case2-h200-pairs: one GPU, world size 1) and NVML figure --------
KEYS = {"step": "median micro-step time", "training_step": "median training_step time",
        "wall": "fit time"}


def machine(rec: dict) -> str:
    """'the recorded NVIDIA H200' (its first GPU), or 'the recorded CPU stand-in' for a record without one.
    Defined in notebook 06_case2_breakeven."""
    gpus = rec.get("machine", {}).get("gpus") or []
    return f"the recorded {gpus[0]}" if gpus else "the recorded CPU stand-in"


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


def _nvml_pair(rec: dict, key: str, what: str) -> V.Verdict:
    on, off = per_round(rec, "fixed-nvml", key), per_round(rec, "fixed", key)
    v = V.paired(f"without the NVML block, {what} takes less time", on, off, faster="b", names=("NVML", "none"))
    m = machine(rec)
    return V.worded(v, holds=f"On {m} the post's NVML block made {what} slower in every round.",
                    fails=f"On {m} {what} was faster with the post's NVML block than without it, in every round.",
                    unresolved=f"On {m} the rounds disagree: the record cannot tell whether the NVML block slows "
                               f"{what} beyond the rounds' spread.",
                    figure=ratio_figure(on, off, "without / with the block per round"))


def nvml_in_training_step(rec: dict) -> V.Verdict:
    """NVML block every step against none (fixed test, Lightning): the claim is
    that `training_step` takes less time without it, in every round. Defined in notebook 05_case2_where_time_goes."""
    return _nvml_pair(rec, "training_step", "training_step")


def nvml_in_step(rec: dict) -> V.Verdict:
    """The same pair on the whole micro-step (data wait, Lightning's loop, backward, optimizer too)."""
    return _nvml_pair(rec, "step", "the whole micro-step")


def nvml_added(rec: dict) -> list[float | None]:
    """Per round: what the NVML block added to training_step (s). Defined in notebook 05_case2_where_time_goes."""
    on, off = per_round(rec, "fixed-nvml", "training_step"), per_round(rec, "fixed", "training_step")
    return [None if a is None or b is None else a - b for a, b in zip(on, off, strict=True)]


def posted_vs_fixed(rec: dict, key: str = "wall") -> V.Verdict:
    """The posted test against the fixed one (which also drops accumulation:
    an optimizer step on every micro-step): the claim is that the fixed one
    takes less time per fit, in every round. Defined in notebook 05_case2_where_time_goes."""
    posted, fixed = per_round(rec, "posted", key), per_round(rec, "fixed", key)
    v = V.paired(f"the fixed test takes less time than the posted one ({KEYS[key]})", posted, fixed,
                 faster="b", names=("posted", "fixed"))
    m = machine(rec)
    return V.worded(v, holds=f"On {m} the fixed test took less time than the posted one ({KEYS[key]}), in every round.",
                    fails=f"On {m} the posted test took less time than the fixed one ({KEYS[key]}), in every round.",
                    unresolved=f"On {m} the rounds disagree: the record cannot tell whether the fixed test is "
                               f"faster ({KEYS[key]}).",
                    figure=ratio_figure(posted, fixed, "fixed / posted per round"))
