"""Case 1's claims about its own runs (notebooks 01-03), each decided by a
`ddp_lessons.tool.verdict` from the numbers the notebook measured: plain lists
and dicts in, a `Verdict` out. The recorded GPU pairs are in `claims_gpu`,
the modelled 133 s against 105 s in `gap`, the bucket facts in `buckets`.
A step's time is taken per rank (data wait, forward, backward with the all-reduce it could not hide,
optimizer); a step's all-reduce is the timer's hook interval summed over buckets (from DDP handing a
bucket over to its all-reduce completing: waiting for a slower peer included); one run's spread is its
steps' interquartile range, so a ratio of two runs is the interval [Q1 / Q3, Q3 / Q1] of their steps,
not one number. Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import statistics

from ....tool import verdict as V
from ....tool.spread import quartiles


def split_disjoint(qids_per_rank: list[list], n_train: int) -> V.Verdict:
    """01: the posted sampler, under a launcher, gives each rank a disjoint
    share and together the whole train split (exact, from the question ids). Defined in notebook 01_case1_broken."""
    sets = [set(q) for q in qids_per_rank]
    shared = sum(len(a & b) for i, a in enumerate(sets) for b in sets[i + 1:])
    covered = len(set().union(*sets))
    ok = V.exact("no question on two ranks", shared, expected=0, what="questions seen by two ranks")
    full = V.exact("the ranks together cover the train split", covered, expected=n_train,
                   what="distinct questions")
    return V.all_of("the posted sampler splits the train split between the ranks (the answer's claim 1 "
                    "does not hold under a launcher)", ok, full)


def two_workers_not_twice_as_fast(rounds: dict) -> V.Verdict:
    """01: with the same per-rank batch, 2 workers take half the steps each, so
    the epoch is twice as fast only if a step is as fast as on 1 worker. The
    claim: in every interleaved round (`scaling.rounds`) a step on the slower of
    the 2 ranks takes longer than on 1 worker (so the epoch is less than twice as fast).
    Defined in notebook 01_case1_broken."""
    ratios = [t2 / t1 for t1, t2 in zip(rounds["1 worker"], rounds["2 workers"], strict=True)]
    return V.repeats("an epoch on 2 workers is less than twice as fast as on 1 (each of their steps is slower)",
                     ratios, side=">", limit=1.0, what="step time, slower rank of 2 / 1 worker, per round")


def eval_wait(rows: list[dict], evaluator: int = 0, other: int = 1) -> V.Verdict:
    """01: the rank that does not evaluate blocks in its first all-reduce after
    the epoch boundary while the evaluating rank evaluates.

    `rows` per rank (`epoch_boundary`): eval_time (s, epoch 0), first_allreduce
    (the first step of epoch 1: the hook interval, waiting for the slower
    peer included), first_data (that step's data wait: the loader restart),
    usual_allreduce (the other steps'). Both ranks leave epoch 0 together (its
    last all-reduce) and finish epoch 1's first all-reduce together, so the
    other rank's extra blocked time is the evaluation plus the difference of
    the loader restarts (and of one forward and backward). The measured
    quantity: (other's first all-reduce - evaluator's - (evaluator's restart -
    other's restart)) / evaluator's evaluation time, with a margin of the
    median ordinary all-reduce (slower rank's) on either side: in an ordinary
    step that interval already holds one rank's wait for the other's backward,
    the size of the forward-and-backward difference left in. Holds above 0.5;
    does not hold below (every rank evaluates its shard: nobody waits). Defined in notebook 01_case1_broken."""
    e, o = rows[evaluator], rows[other]
    if e["eval_time"] <= 0:
        raise ValueError(f"rank {evaluator} did not evaluate (eval_time {e['eval_time']}): pass the evaluating rank")
    margin = max(quartiles(r["usual_allreduce"])[1] for r in rows)
    restart = e["first_data"] - o["first_data"]
    excess = o["first_allreduce"] - e["first_allreduce"] - restart
    lo, hi = (excess - margin) / e["eval_time"], (excess + margin) / e["eval_time"]
    return V.interval(f"rank {other} is blocked in its first all-reduce of epoch 1 while rank {evaluator} evaluates",
                      lo, hi, side=">", limit=0.5,
                      what=f"(blocked rank {other} - rank {evaluator} - restart difference) / evaluation",
                      numbers={"evaluation": f"{e['eval_time']:.2f} s",
                               f"first all-reduce rank {evaluator}, {other}":
                                   f"{e['first_allreduce']:.3f}, {o['first_allreduce']:.3f} s",
                               f"loader restart rank {evaluator} - rank {other}": f"{restart:.3f} s",
                               "margin (median ordinary all-reduce)": f"{margin:.3f} s"})


def epoch_boundary(results: list[dict]) -> list[dict]:
    """Per rank of a 2-epoch `case1.train` run: eval_time of epoch 0,
    first_allreduce and first_data (loader restart) of epoch 1's first step,
    usual_allreduce and usual_data (the other steps after the warm-up). Defined in notebook 01_case1_broken."""
    rows = []
    for r in results:
        per, steps = r["steps_per_epoch"], r["timer"]["steps"]
        others = steps[2:per] + steps[per + 1:]
        rows.append({"rank": r["rank"], "eval_time": r["epochs"][0]["eval_time"],
                     "first_allreduce": steps[per].get("allreduce", 0.0), "first_data": steps[per]["data"],
                     "usual_allreduce": [s.get("allreduce", 0.0) for s in others],
                     "usual_data": statistics.median(s["data"] for s in others)})
    return rows


def same_counts(claim: str, rows_a: list, rows_b: list, what: str) -> V.Verdict:
    """Two runs' exact per-rank counts (samples, steps, log lines) equal. Defined in notebook 01_case1_broken."""
    return V.exact(claim, list(rows_b), expected=list(rows_a), what=what)


def order_repeats(without: list[list], with_set: list[list]) -> V.Verdict:
    """03: without `set_epoch` epoch 1 visits the samples in epoch 0's order;
    with it the order changes (each argument: the per-epoch qid orders of one run).
    Defined in notebook 03_case1_beyond."""
    return V.all_of("set_epoch reshuffles every epoch; without it the order repeats",
                    V.exact("without: same order", without[0] == without[1], expected=True,
                            what="without set_epoch, epoch 1 order == epoch 0's"),
                    V.exact("with: new order", with_set[0] == with_set[1], expected=False,
                            what="with set_epoch, epoch 1 order == epoch 0's"))


def epoch_longer_halved(kept: list[float], halved: list[float]) -> V.Verdict:
    """02: per interleaved round, an epoch's compute as steps per epoch x the
    median step (slower rank), batch kept (`kept`) or halved (`halved`). The
    claim: halving the batch makes the epoch longer, because each rank then
    takes twice the steps and a step on half the samples costs more than
    half as much (the all-reduce and the optimizer do not shrink with the batch).
    Decided on the rounds' quartiles (`verdict.separated`). Defined in notebook 02_case1_answer."""
    return V.separated("with the batch halved an epoch takes longer than with the batch kept",
                    kept, halved, faster="a", names=("batch kept", "batch halved"))


def bytes_change_only_with(rows: list[dict], marker: str) -> V.Verdict:
    """02: of the ablation rows, exactly those whose name contains `marker`
    (or the cumulative rows after it) all-reduce different bytes from the first.
    Defined in notebook 02_case1_answer."""
    base = rows[0]["allreduce_bytes"]
    changed = [r["variant"] for r in rows if r["allreduce_bytes"] != base]
    stray = [n for n in changed if marker not in n and not n.startswith("up to: 4")]
    v1 = V.exact("some row changes the bytes", len(changed), side=">", limit=0, what="rows that change them")
    v2 = V.exact("no other fix changes them", stray, expected=[], what="other rows that change them")
    return V.all_of(f"only the fix {marker} changes the bytes all-reduced per step", v1, v2)


def raises(claim: str, error: str | None, expected: str) -> V.Verdict:
    """A run that must fail: holds when it raised an error containing `expected`.
    Defined in notebook 02_case1_answer."""
    got = "no error" if error is None else error
    return V.exact(claim, expected in got, expected=True, what=f"error contains {expected!r}",
                   numbers={"error": got[:90]})


def core_overbooked(workers: int, threads: int, cores: int, ranks: int, claim: str) -> V.Verdict:
    """The core budget: a rank's loader workers plus its intra-op threads
    against its share of the cores (cores // ranks). Holds when they exceed it.
    Defined in notebook 02_case1_answer."""
    share = max(1, cores // max(1, ranks))
    return V.exact(claim, workers + threads, side=">", limit=share,
                   what="loader workers + intra-op threads per rank",
                   numbers={"share of cores per rank": f"{cores} // {ranks} = {share}"})


def distributed_count_equal(single: list[int], summed: list[int], claim: str) -> V.Verdict:
    """02: evaluation counts [open n, open right, closed n, closed right]
    summed over ranks equal one process's over the whole test set. Says
    nothing (not resolvable) when the model got none or all right: a count of
    0 equals 0 whatever the shards did. Defined in notebook 02_case1_answer."""
    n, right = single[0] + single[2], single[1] + single[3]
    if not 0 < right < n:
        return V.Verdict(claim, V.UNRESOLVED, {"right": f"{right} of {n}"},
                         "needs a model that gets some, not all, answers right")
    return V.exact(claim, list(summed), expected=list(single), what="counts [open n, right, closed n, right]",
                   numbers={"single process right": f"{right} of {n}"})


def scaling_below(rounds: dict, limit: float = 0.75) -> V.Verdict:
    """03: scaling efficiency = 2-worker throughput / (2 x 1-worker throughput),
    per interleaved round (`scaling.efficiency`). The claim: it stays below `limit`.
    Defined in notebook 03_case1_beyond."""
    from ..scaling import efficiency
    return V.repeats(f"scaling efficiency on 2 workers stays below {limit:.0%} here" if limit < 1 else
                     "2 workers stay below perfect scaling here", efficiency(rounds), side="<", limit=limit,
                     what="efficiency per round")


def diagnosis_sees_evaluation(ranks: list, evaluating: int = 0, factor: float = 10.0) -> V.Verdict:
    """`diagnose`'s per-rank account (`Diagnosis.ranks`, `outside_work`) keeps the evaluation
    as work outside the steps on the evaluating rank only: there it is over
    `factor` times any other rank's. The same fact the lesson counted from
    `eval_time`, read back through the diagnosis, so the tool and the lesson
    are checked against each other (a timer that put the evaluation into a
    step, or on every rank, makes this fail). Defined in notebook 01_case1_broken."""
    ev = [r.get("outside_work", {}).get("evaluation", 0.0) for r in ranks]
    others = max((e for i, e in enumerate(ev) if i != evaluating), default=0.0)
    ratio = 0.0 if ev[evaluating] <= 0 else ev[evaluating] / others if others > 0 else float("inf")
    return V.exact(f"diagnose's account holds rank {evaluating}'s evaluation as work outside its steps, "
                   f"on that rank only", ratio, side=">", limit=factor,
                   what=f"rank {evaluating}'s evaluation / the largest other rank's",
                   numbers={"evaluation s per rank": ", ".join(f"{e:.3g}" for e in ev)})


def diagnosis_shares_evaluation(ranks: list, factor: float = 3.0) -> V.Verdict:
    """With the evaluation distributed, `diagnose`'s account holds evaluation
    as outside work on every rank, in similar amounts: the largest rank's is
    under `factor` times the smallest's (each rank evaluates its shard).
    Fails where one rank evaluates alone (the posted setup). Defined in notebook 03_case1_beyond."""
    ev = [r.get("outside_work", {}).get("evaluation", 0.0) for r in ranks]
    ratio = max(ev) / min(ev) if min(ev) > 0 else float("inf")
    return V.exact("diagnose's account holds the evaluation on every rank, in similar amounts", ratio,
                   side="<", limit=factor, what="largest / smallest rank's evaluation",
                   numbers={"evaluation s per rank": ", ".join(f"{e:.3g}" for e in ev)})
