"""Case 1's timed claims about its own CPU runs (notebooks 01-03): one worker against two, the
evaluation's wait, the batch choices, scaling. Exact counts are in `counts`, the recorded GPU rounds
in `gpu`, the models in `model`, diagnose's account in `diagnosis`.
A step's all-reduce is the timer's hook interval summed over buckets (from DDP handing a bucket over
to its all-reduce completing: waiting for a slower peer included). Each verdict is worded here: a
plain sentence per outcome, naming the machine, and one short figure. Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

from ....tool import verdict as V
from ....tool.spread import quartiles



def two_workers_not_twice_as_fast(rounds: dict) -> V.Verdict:
    """01: with the per-rank batch kept, 2 workers take half the steps each; the claim: in every interleaved
    round (`scaling.rounds`) a step on the slower of 2 ranks takes longer than on 1.
    Defined in notebook 01_case1_broken."""
    ratios = [t2 / t1 for t1, t2 in zip(rounds["1 worker"], rounds["2 workers"], strict=True)]
    v = V.repeats("an epoch on 2 workers is less than twice as fast as on 1 (each of their steps is slower)",
                  ratios, side=">", limit=1.0, what="step time, slower rank of 2 / 1 worker, per round")
    return V.worded(v, holds="On this CPU machine a step on 2 workers took longer than on 1 in every round, so "
                             "splitting the data over 2 workers does not halve the epoch.",
                    fails="On this CPU machine a step on 2 workers took no longer than on 1 in every round, so "
                          "splitting the data over 2 workers halves the epoch here.",
                    unresolved="On this CPU machine a step on 2 workers was slower than on 1 in some rounds and "
                               "not in others: the rounds cannot tell whether the epoch halves.",
                    figure=_span("2 / 1 worker step", ratios))


def eval_wait(rows: list[dict], evaluator: int = 0, other: int = 1) -> V.Verdict:
    """01: the rank that does not evaluate blocks in its first all-reduce of the next epoch while the
    evaluating rank evaluates. `rows` per rank (`readout.epoch_boundary`). Both ranks leave epoch 0 and
    finish epoch 1's first all-reduce together, so the other rank's extra blocked time is the evaluation
    plus the difference of the loader restarts. Measured: (other's first all-reduce - evaluator's -
    restart difference) / evaluation time, +- the median ordinary all-reduce (which already holds one
    rank's wait for the other's backward). Holds above 0.5; does not hold below (nobody waits).
    Defined in notebook 01_case1_broken."""
    e, o = rows[evaluator], rows[other]
    if e["eval_time"] <= 0:
        raise ValueError(f"rank {evaluator} did not evaluate (eval_time {e['eval_time']}): pass the evaluating rank")
    margin = max(quartiles(r["usual_allreduce"])[1] for r in rows)
    restart = e["first_data"] - o["first_data"]
    excess = o["first_allreduce"] - e["first_allreduce"] - restart
    lo, hi = (excess - margin) / e["eval_time"], (excess + margin) / e["eval_time"]
    v = V.interval(f"rank {other} is blocked in its first all-reduce of epoch 1 while rank {evaluator} evaluates",
                   lo, hi, side=">", limit=0.5,
                      what=f"(blocked rank {other} - rank {evaluator} - restart difference) / evaluation",
                      numbers={"evaluation": f"{e['eval_time']:.2f} s",
                               f"first all-reduce rank {evaluator}, {other}":
                                   f"{e['first_allreduce']:.3f}, {o['first_allreduce']:.3f} s",
                               f"loader restart rank {evaluator} - rank {other}": f"{restart:.3f} s",
                               "margin (median ordinary all-reduce)": f"{margin:.3f} s"})
    return V.worded(v, holds=f"In the posted setup rank {other} sat in its first all-reduce of the next epoch for "
                             f"about as long as rank {evaluator} evaluated: the rank that does not evaluate waits "
                             "out the evaluation.",
                    fails=f"In this run rank {other}'s first all-reduce of the next epoch was no longer than usual "
                          f"once the loader restart is taken out: it did not wait out rank {evaluator}'s evaluation.",
                    unresolved=f"In this run rank {other}'s extra time in its first all-reduce of the next epoch is "
                               "within an ordinary all-reduce of half the evaluation: it cannot tell whether "
                               "the rank waited it out.",
                    figure=f"rank {other}'s extra wait / rank {evaluator}'s evaluation {lo:.2f} .. {hi:.2f}")



def epoch_longer_halved(kept: list[float], halved: list[float]) -> V.Verdict:
    """02: per interleaved round, an epoch's compute as steps per epoch x the
    median step (slower rank), batch kept (`kept`) or halved (`halved`). The
    claim: halving the batch makes the epoch longer, because each rank then
    takes twice the steps and a step on half the samples costs more than
    half as much (the all-reduce and the optimizer do not shrink with the batch).
    Decided on the rounds' quartiles (`verdict.separated`). Defined in notebook 02_case1_answer."""
    v = V.separated("with the batch halved an epoch takes longer than with the batch kept",
                    kept, halved, faster="a", names=("batch kept", "batch halved"))
    return V.worded(v, holds="On this CPU machine an epoch with the per-rank batch halved took longer than with "
                             "the batch kept: a step on half the samples costs more than half a step.",
                    fails="On this CPU machine an epoch with the per-rank batch halved took less time than with "
                          "the batch kept.",
                    unresolved="On this CPU machine the rounds cannot tell which batch choice gives the shorter "
                               "epoch: their middle halves overlap, or there are too few rounds.",
                    figure=f"halved / kept {next(iter(v.numbers.values()))}")






def scaling_below(rounds: dict, limit: float = 0.75, setup: str = "this setup") -> V.Verdict:
    """03: scaling efficiency = 2-worker throughput / (2 x 1-worker throughput),
    per interleaved round (`scaling.efficiency`). The claim: it stays below `limit`.
    Defined in notebook 03_case1_beyond."""
    from ..scaling import efficiency
    eff = efficiency(rounds)
    v = V.repeats(f"scaling efficiency on 2 workers stays below {limit:.0%} here" if limit < 1 else
                  "2 workers stay below perfect scaling here", eff, side="<", limit=limit,
                  what="efficiency per round")
    aim = f"{limit:.0%} scaling efficiency" if limit < 1 else "perfect scaling"
    return V.worded(v, holds=f"On this CPU machine 2 workers of {setup} stayed below {aim} in every round.",
                    fails=f"On this CPU machine 2 workers of {setup} reached {aim} in every round.",
                    unresolved=f"On this CPU machine 2 workers of {setup} were below {aim} in some rounds and "
                               "reached it in others: the machine's load, not the code, decides it here.",
                    figure=_span("efficiency", eff, pct=True))


def _span(what: str, values: list, pct: bool = False) -> str:
    """One short figure: `what` min .. max (n rounds)."""
    if not values:
        return f"{what}: no rounds"
    lo, hi = min(values), max(values)
    text = f"{lo:.0%} .. {hi:.0%}" if pct else f"{lo:.2f} .. {hi:.2f}"
    return f"{what} {text} ({len(values)} rounds)"


def split_disjoint(qids_per_rank: list[list], n_train: int) -> V.Verdict:
    """01: the posted sampler, under a launcher, gives each rank a disjoint
    share and together the whole train split (exact, from the question ids). Defined in notebook 01_case1_broken."""
    sets = [set(q) for q in qids_per_rank]
    shared = sum(len(a & b) for i, a in enumerate(sets) for b in sets[i + 1:])
    covered = len(set().union(*sets))
    ok = V.exact("no question on two ranks", shared, expected=0, what="questions seen by two ranks")
    full = V.exact("the ranks together cover the train split", covered, expected=n_train,
                   what="distinct questions")
    v = V.all_of("the posted sampler splits the train split between the ranks (the answer's claim 1 "
                 "does not hold under a launcher)", ok, full)
    return V.worded(v, holds="Under a launcher the posted DistributedSampler gives each rank its own half of the "
                             "training questions: the answer's claim 1 does not hold for this script.",
                    fails="Under a launcher the posted sampler did not split the training questions cleanly "
                          "(a question on two ranks, or one on none): the answer's claim 1 holds here.",
                    figure=f"{shared} questions on two ranks; {covered} of {n_train} covered")


def same_split(posted: list[int], answer: list[int]) -> V.Verdict:
    """02, claim 1: the answer's order (init, then sampler) gives each rank the samples the
    posted order gave. Defined in notebook 02_case1_answer."""
    v = V.exact("the answer's order (init, then sampler) gives each rank the same samples as posted",
                list(answer), expected=list(posted), what="samples per rank")
    return V.worded(v, holds="Under a launcher the answer's order (init, then sampler) gives each rank the same "
                             "samples as the posted order: a harmless change that fixes nothing here.",
                    fails="Under a launcher the answer's order gives the ranks other samples than the posted "
                          "order: the posted split was not the same.",
                    figure=f"samples per rank: posted {posted}, answer {answer}")


def only_rank0_logs(lines_per_rank: list[int]) -> V.Verdict:
    """02, claim 3: with the answer's change only rank 0 writes log lines. Defined in notebook 02_case1_answer."""
    v = V.exact("with the answer only rank 0 logs", lines_per_rank[1:], expected=[0] * (len(lines_per_rank) - 1),
                what="log lines on the other ranks")
    return V.worded(v, holds="With the answer's change only rank 0 logs; the other ranks write nothing.",
                    fails="With the answer's change other ranks than rank 0 still write log lines.",
                    figure=f"log lines per rank {lines_per_rank}")


def unused_heads_crash(error: str | None) -> V.Verdict:
    """02, claim 4a: `find_unused_parameters=False` with the unused heads kept stops the run with
    DDP's reduction error. Defined in notebook 02_case1_answer."""
    v = V.exact("find_unused_parameters=False with the heads kept fails",
                "Expected to have finished reduction" in (error or ""), expected=True,
                what="DDP's reduction error raised", numbers={"error": (error or "no error")[:90]})
    return V.worded(v, holds="With the unused heads kept, find_unused_parameters=False stops the run with DDP's "
                             "'Expected to have finished reduction' error: the answer's fix 4 alone crashes "
                             "this model.",
                    fails="With the unused heads kept, find_unused_parameters=False did not raise DDP's reduction "
                          "error here: the heads received gradients, or the run stopped for another reason.",
                    figure=(error or "no error")[:60])


def bytes_change_only_with(rows: list[dict], marker: str) -> V.Verdict:
    """02: of the ablation rows, exactly those whose name contains `marker`
    (or the cumulative rows after it) all-reduce different bytes from the first.
    Defined in notebook 02_case1_answer."""
    base = rows[0]["allreduce_bytes"]
    changed = [r["variant"] for r in rows if r["allreduce_bytes"] != base]
    stray = [n for n in changed if marker not in n and not n.startswith("up to: 4")]
    v1 = V.exact("some row changes the bytes", len(changed), side=">", limit=0, what="rows that change them")
    v2 = V.exact("no other fix changes them", stray, expected=[], what="other rows that change them")
    v = V.all_of(f"only the fix {marker} changes the bytes all-reduced per step", v1, v2)
    other = min((r["allreduce_bytes"] for r in rows if r["allreduce_bytes"] != base), default=base)
    return V.worded(v, holds=f"Of the answer's fixes only {marker}, which drops the unused heads, changes the "
                             "bytes all-reduced per step; every other fix leaves them as posted.",
                    fails=f"The bytes all-reduced per step do not change with {marker} alone: "
                          + (f"{', '.join(stray)} changes them too." if stray else "no fix changes them."),
                    figure=f"{base:,} -> {other:,} B per step")


def every_rank_counts_all(counted: list, n_test: int) -> V.Verdict:
    """03: with the evaluation distributed, every rank ends with the count of the whole test set
    (its shard, summed). Defined in notebook 03_case1_beyond."""
    v = V.exact("every rank evaluated and counted the whole test set (its shard, summed)",
                list(counted), expected=[n_test] * len(counted), what="questions counted per rank")
    return V.worded(v, holds="With the evaluation distributed, every rank scored its shard and ended with the "
                             "whole test set's counts: no rank evaluates alone while the others wait.",
                    fails="With the evaluation distributed, some rank did not end with the whole test set's "
                          "counts: the shards or their sum are wrong.",
                    figure=f"questions counted per rank {counted} of {n_test}")


def distributed_count_equal(single: list[int], summed: list[int], claim: str) -> V.Verdict:
    """02: evaluation counts [open n, open right, closed n, closed right]
    summed over ranks equal one process's over the whole test set. Says
    nothing (not resolvable) when the model got none or all right: a count of
    0 equals 0 whatever the shards did. Defined in notebook 02_case1_answer."""
    n, right = single[0] + single[2], single[1] + single[3]
    if not 0 < right < n:
        v = V.Verdict(claim, V.UNRESOLVED, {"right": f"{right} of {n}"},
                      "needs a model that gets some, not all, answers right")
    else:
        v = V.exact(claim, list(summed), expected=list(single), what="counts [open n, right, closed n, right]",
                    numbers={"single process right": f"{right} of {n}"})
    return V.worded(v, holds="The counts summed over the ranks equal one process's over the same questions: "
                             "no question lost, none counted twice.",
                    fails="The counts summed over the ranks differ from one process's over the same questions: "
                          "a question was lost or counted twice.",
                    unresolved="The model got no answer, or every answer, right: equal counts would prove nothing.",
                    figure=f"summed {list(summed)}, one process {list(single)}")


def order_repeats(without: list[list], with_set: list[list]) -> V.Verdict:
    """03: without `set_epoch` epoch 1 visits the samples in epoch 0's order;
    with it the order changes (each argument: the per-epoch qid orders of one run).
    Defined in notebook 03_case1_beyond."""
    same_without, same_with = without[0] == without[1], with_set[0] == with_set[1]
    v = V.all_of("set_epoch reshuffles every epoch; without it the order repeats",
                 V.exact("without: same order", same_without, expected=True,
                         what="without set_epoch, epoch 1 order == epoch 0's"),
                 V.exact("with: new order", same_with, expected=False,
                         what="with set_epoch, epoch 1 order == epoch 0's"))
    return V.worded(v, holds="Without set_epoch the DistributedSampler repeats epoch 0's order in epoch 1; with "
                             "it the order changes.",
                    fails="set_epoch did not decide the order here: "
                          + ("without it the order changed too." if not same_without
                             else "with it the order repeated too."),
                    figure=f"epoch 1 order == epoch 0's: without {same_without}, with {same_with}")


def core_overbooked(workers: int, threads: int, cores: int, ranks: int, what: str, machine: str) -> V.Verdict:
    """The core budget: a rank's loader workers plus its intra-op threads
    against its share of the cores (cores // ranks). Holds when they exceed it.
    `what` names the setting, `machine` the machine. Defined in notebook 02_case1_answer."""
    share = max(1, cores // max(1, ranks))
    v = V.exact(f"{what} double-books the cores of {machine}", workers + threads, side=">", limit=share,
                what="loader workers + intra-op threads per rank",
                numbers={"share of cores per rank": f"{cores} // {ranks} = {share}"})
    return V.worded(v, holds=f"On {machine}, {what} double-books the cores: a rank's loader workers and "
                             "threads outnumber its share of them, so they take turns.",
                    fails=f"On {machine}, {what} fits in each rank's share of the cores.",
                    figure=f"{workers} workers + {threads} threads per rank vs {share} core(s)")


def _evaluation(ranks: list) -> list[float]:
    return [r.get("outside_work", {}).get("evaluation", 0.0) for r in ranks]


def diagnosis_sees_evaluation(ranks: list, evaluating: int = 0, factor: float = 10.0) -> V.Verdict:
    """`diagnose`'s account (`Diagnosis.ranks`) holds the evaluation outside the steps on the evaluating
    rank only: over `factor` times any other rank's (`diagnosis_agrees` words it)."""
    ev = _evaluation(ranks)
    others = max((e for i, e in enumerate(ev) if i != evaluating), default=0.0)
    ratio = 0.0 if ev[evaluating] <= 0 else ev[evaluating] / others if others > 0 else float("inf")
    return V.exact(f"diagnose's account holds rank {evaluating}'s evaluation as work outside its steps, "
                   f"on that rank only", ratio, side=">", limit=factor,
                   what=f"rank {evaluating}'s evaluation / the largest other rank's",
                   numbers={"evaluation s per rank": ", ".join(f"{e:.3g}" for e in ev)})


def diagnosis_agrees(found, evaluating: int = 0) -> V.Verdict:
    """01: `diagnose` (a `Diagnosis`) holds the evaluation outside the steps on the evaluating rank
    only, and names both causes the lesson measured: the exposed all-reduce (in general, or as the
    last bucket's) and the work outside the steps. Defined in notebook 01_case1_broken."""
    sees = diagnosis_sees_evaluation(found.ranks, evaluating)
    wanted = {"the exposed all-reduce": ("exposed_allreduce", "last_bucket_exposed"),
              "the work outside the steps": ("outside_steps",)}
    missing = [label for label, keys in wanted.items() if not set(keys) & set(found.causes)]
    named = V.exact("diagnose names the exposed all-reduce and the work outside the steps", len(missing),
                    expected=0, what="causes the lesson measured that it misses",
                    numbers={"findings, most costly first": ", ".join(found.causes) or "none"})
    v = V.all_of("diagnose finds what the lesson measured", sees, named)
    why = ([f"it does not hold the evaluation on rank {evaluating} alone"] if sees.fails else []) \
        + ([f"it does not name {' or '.join(missing)}"] if missing else [])
    return V.worded(v, holds=f"diagnose finds what this lesson measured on the posted setup: rank {evaluating}'s "
                             "evaluation as work outside its steps on that rank alone, and the exposed all-reduce "
                             "among the causes.",
                    fails="diagnose's account of this run differs from the lesson's: " + "; ".join(why or ["?"]) + ".",
                    figure=f"findings: {', '.join(found.causes[:4]) or 'none'}")


def diagnosis_shares_evaluation(ranks: list, factor: float = 3.0) -> V.Verdict:
    """With the evaluation distributed, `diagnose` holds it as outside work on every rank, the largest
    rank's under `factor` times the smallest's; fails where one rank evaluates alone.
    Defined in notebook 03_case1_beyond."""
    ev = _evaluation(ranks)
    ratio = max(ev) / min(ev) if min(ev) > 0 else float("inf")
    v = V.exact("diagnose's account holds the evaluation on every rank, in similar amounts", ratio,
                side="<", limit=factor, what="largest / smallest rank's evaluation",
                numbers={"evaluation s per rank": ", ".join(f"{e:.3g}" for e in ev)})
    return V.worded(v, holds="diagnose holds the fixed setup's evaluation on every rank in similar amounts: "
                             "each rank evaluated its shard, none waited for another's.",
                    fails="diagnose holds the evaluation unevenly across the ranks: one rank evaluated "
                          "(nearly) alone.",
                    figure=f"largest / smallest rank's evaluation {ratio:.3g}")
