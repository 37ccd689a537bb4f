"""Notebook 07's claims, each decided by the run's numbers (`ddp_lessons.tool.verdict`).

Each function takes plain numbers (lists, dicts) and returns a Verdict that
could have come out either way; tests/cases/own/test_own_claims.py gives each a
counter-example. Defined in notebook 07_diagnose_your_own_run.
"""

from __future__ import annotations

from ...tool import verdict as v


def same_order_each_epoch(orders: list[list[int]]) -> v.Verdict:
    """Epoch 1 draws the same samples in the same order as epoch 0 (no `set_epoch`).
    Defined in notebook 07_diagnose_your_own_run."""
    return v.exact("epoch 1 repeats epoch 0's sample order", orders[0] == orders[1], expected=True,
                   what="same order", numbers={"first indices": f"{orders[0][:4]} / {orders[1][:4]}"})


def set_epoch_reshuffles(broken: list[list[int]], fixed: list[list[int]]) -> v.Verdict:
    """Without `set_epoch` (broken) epoch 1 repeats epoch 0's order; with it (fixed) it does not.
    Defined in notebook 07_diagnose_your_own_run."""
    both = v.all_of("without set_epoch epoch 1 repeats epoch 0's order, and with it it does not",
                    same_order_each_epoch(broken), v.exact("with set_epoch the order changes",
                                                           fixed[0] != fixed[1], expected=True, what="new order"))
    return v.worded(both, holds="The broken setup trains epoch 1 on epoch 0's sample order; with set_epoch the "
                    "fixed setup reshuffles.", fails="Here the sample order does not behave as described: the "
                    "broken setup reshuffled, or the fixed one repeated its order.",
                    figure=f"first indices, broken: {broken[0][:3]} / {broken[1][:3]}; fixed: {fixed[0][:3]} / "
                    f"{fixed[1][:3]}")


def every_rank_evaluates_everything(samples_per_rank: list[int], test_size: int) -> v.Verdict:
    """Each rank evaluates the whole test set (not its share). Defined in notebook 07_diagnose_your_own_run."""
    return v.exact("every rank evaluates the whole test set", min(samples_per_rank) == test_size,
                   expected=True, what="each rank saw every test sample",
                   numbers={"samples per rank": samples_per_rank, "test set": test_size})


def evaluation_share_large(shares: list[float], limit: float = 0.2) -> v.Verdict:
    """Evaluation takes more than `limit` of each rank's train + eval time (every rank, every round).
    Defined in notebook 07_diagnose_your_own_run."""
    out = v.repeats(f"evaluation is over {limit:.0%} of each rank's epoch time", shares, side=">",
                    limit=limit, what="eval share per rank and round")
    return v.worded(out, holds=f"On 2 ranks of this machine each rank spends over {limit:.0%} of its epoch time "
                    "evaluating, in every round.",
                    fails=f"On 2 ranks of this machine evaluation stays under {limit:.0%} of each rank's epoch "
                    "time in every round.",
                    figure=f"eval share {min(shares):.0%} .. {max(shares):.0%} ({len(shares)} rank-rounds)")


def speedup_below(one: list[float], two: list[float], limit: float = 1.5) -> v.Verdict:
    """2 ranks are less than `limit` times as fast as 1, round by round
    (`one[i]`, `two[i]`: round i's run times on 1 and on 2 ranks). Defined in notebook 07_diagnose_your_own_run."""
    ratios = [a / b for a, b in zip(one, two, strict=True)]
    out = v.repeats(f"2 ranks are less than {limit} x as fast as 1", ratios,
                    side="<", limit=limit, what="speed-up 1 rank / 2 ranks per round")
    return v.worded(out, holds=f"With the habits, 2 ranks on this machine are less than {limit}x as fast as 1, "
                    "in every round.", fails=f"Even with the habits, 2 ranks on this machine are more than "
                    f"{limit}x as fast as 1, in every round.",
                    figure=f"speed-up {min(ratios):.2f} .. {max(ratios):.2f} ({len(ratios)} rounds)")


def fix_is_faster(broken: list[float], fixed: list[float], world: int, where: str = "this machine") -> v.Verdict:
    """The fixed setup's run takes less time than the broken one's, from the
    rounds' quartiles (`verdict.separated`: one disturbed round on a shared
    machine does not decide it). Defined in notebook 07_diagnose_your_own_run."""
    out = v.separated(f"on {world} rank(s) the fixed setup takes less time than the broken one", broken, fixed,
                      faster="b", names=("broken", "fixed"))
    ranks = f"{world} rank{'s' if world > 1 else ''} of {where}"
    return v.worded(out, holds=f"On {ranks} the fixed setup's run is shorter than the broken one's.",
                    fails=f"On {ranks} the fixed setup's run is longer than the broken one's: this fix "
                    "costs more than it saves at this run's length.",
                    unresolved=f"On {ranks} this run cannot tell the fixed setup's run time from the "
                    "broken one's: the rounds overlap.",
                    figure=f"fixed/broken {out.numbers.get('fixed/broken (quartile bounds)', '')}".strip())


def evaluation_not_split(eval_1: list[float], eval_2: list[float], limit: float = 0.6) -> v.Verdict:
    """Round by round, each of 2 ranks spends over `limit` of the 1-rank evaluation
    time evaluating (split in two it would be about 0.5). `eval_2[i]`: round i's
    evaluation times of the 2 ranks. Defined in notebook 07_diagnose_your_own_run."""
    ratios = [t / one for one, ranks in zip(eval_1, eval_2, strict=True) for t in ranks]
    return v.repeats(f"each of 2 ranks spends over {limit} x the 1-rank evaluation time", ratios,
                     side=">", limit=limit, what="eval per rank, 2 ranks / 1 rank, per round")


def largest_cost(costs_by_round: list[list[dict]], cause: str) -> v.Verdict:
    """`cause` costs more than every other measured cause together, in every round, each summed
    over the ranks: what the run lost, not one rank's share of it (beside busy processes one rank's
    wait can swell in one round while the run's total does not). Defined in notebook
    07_diagnose_your_own_run."""
    ratios = []
    for ranks in costs_by_round:
        mine = sum(r[cause] for r in ranks)
        others = sum(x for r in ranks for k, x in r.items() if k not in ("rank", cause))
        ratios.append(mine / max(1e-12, others))
    out = v.repeats(f"{cause} costs more than the other measured causes together", ratios, side=">",
                    limit=1.0, what=f"{cause} / the others, summed over the ranks, per round")
    return v.worded(out, holds=f"{cause.capitalize()} costs more than every other measured cause together, "
                    "in every round: fix it first.",
                    fails=f"{cause.capitalize()} costs less than the other measured causes together, in every "
                    "round: it is not the first thing to fix here.",
                    figure=f"{cause} / the others {min(ratios):.2f} .. {max(ratios):.2f} ({len(ratios)} rounds)")


def same_gradients(max_abs_diff: float, max_abs_grad: float, rel: float = 1e-5) -> v.Verdict:
    """The accumulated gradients equal the large batch's (float rounding aside).
    Defined in notebook 07_diagnose_your_own_run."""
    out = v.exact("accumulated gradients equal the large-batch gradients", max_abs_diff / max_abs_grad,
                  side="<", limit=rel, what="largest difference / largest gradient")
    return v.worded(out, holds="Accumulating under no_sync gives the large batch's gradients (float rounding "
                    "aside).", fails="Accumulating under no_sync did not give the large batch's gradients here.",
                    figure=f"largest difference / largest gradient {max_abs_diff / max_abs_grad:.1e}")


def fewer_allreduces(with_no_sync: int, without: int) -> v.Verdict:
    """Defined in notebook 07_diagnose_your_own_run."""
    return v.exact("no_sync sends fewer all-reduces per optimizer step", with_no_sync, side="<",
                   limit=without, what="all-reduce calls with no_sync", numbers={"without": str(without)})


def names_parameters(message: str | None, names: list[str]) -> v.Verdict:
    """The error message names every unused parameter. Defined in notebook 07_diagnose_your_own_run."""
    found = [n for n in names if message and n in message]
    return v.exact("the error names the unused parameters", len(found), expected=len(names),
                   what="names found", numbers={"unused": ", ".join(names)})


def oversubscribed(load: dict) -> v.Verdict:
    """More runnable threads and processes than cores: they take turns.
    Defined in notebook 07_diagnose_your_own_run."""
    return v.exact(f"{load['ranks']} ranks x ({load['threads']} threads + {load['workers']} workers) "
                   f"oversubscribe {load['cores']} cores", load["busy"], side=">", limit=load["cores"],
                   what="threads + workers")


def no_peer_transport(lines: list[str], nranks: int) -> v.Verdict:
    """No NCCL line names a transport to another GPU (`via P2P`, `via SHM`, `via NET`).
    Defined in notebook 07_diagnose_your_own_run."""
    via = [ln for ln in lines if " via " in ln]
    return v.exact(f"at world size {nranks} NCCL sets up no transport between GPUs", len(via), expected=0,
                   what="lines naming a transport ('via ...')", numbers={"NCCL lines": str(len(lines))})


def step_is_shorter(broken: list[float], fixed: list[float], where: str) -> v.Verdict:
    """The fixed setup's median step is shorter than the broken one's, round by round.
    Defined in notebook 07_diagnose_your_own_run."""
    out = v.paired(f"on {where} the fixed setup's median step is shorter than the broken one's", broken, fixed,
                   faster="b", names=("broken", "fixed"))
    ratios = [f / b for b, f in zip(broken, fixed, strict=True) if b and f]
    return v.worded(out, holds=f"On {where} the fixed setup's step is shorter than the broken one's in every "
                    "round.", fails=f"On {where} the fixed setup's step is longer than the broken one's in every "
                    "round.", figure=f"fixed/broken median step {min(ratios):.2f} .. {max(ratios):.2f} "
                    f"({len(ratios)} rounds)" if ratios else "")


def mostly_idle(idle_pct: float, limit: float = 50.0) -> v.Verdict:
    """The GPU is idle for more than `limit` % of the traced steps (HTA's temporal breakdown).
    Defined in notebook 07_diagnose_your_own_run."""
    out = v.exact(f"the GPU is idle for over {limit:g}% of the traced steps", idle_pct, side=">", limit=limit,
                  what="idle time %")
    return v.worded(out, holds=f"The recorded GPU sat idle for most of the traced steps ({idle_pct:.0f}%): the "
                    "host, not the GPU, set the pace.", fails=f"The recorded GPU was busy for most of the traced "
                    f"steps (idle {idle_pct:.0f}%).", figure=f"idle {idle_pct:.0f}% of the traced steps")


def coverage(accounts: list[dict]) -> list[float]:
    """Per account (one per rank and round): (steps + work outside them) / wall,
    the share of the rank's time the timer's marks explain. Defined in notebook 07_diagnose_your_own_run."""
    return [(a["steps"] + sum(a["outside"].values())) / a["wall"] for a in accounts if a["wall"] > 0]

def debug_levels(errors: dict, names: list[str]) -> v.Verdict:
    """The unused-parameter error names the parameters at TORCH_DISTRIBUTED_DEBUG=INFO (and DETAIL) and
    only gives indices at the default level. `errors`: level -> message.
    Defined in notebook 07_diagnose_your_own_run."""
    both = v.all_of("INFO names the unused parameters and the default level does not",
                    names_parameters(errors.get("INFO"), names),
                    v.exact("the default level gives indices only", any(n in (errors.get("OFF") or "") for n in names),
                            expected=False, what="a name in the default message"))
    return v.worded(both, holds="TORCH_DISTRIBUTED_DEBUG=INFO already names the unused parameters (the default "
                    "level gives indices only): reach for INFO before DETAIL.",
                    fails="In this torch the debug levels do not behave as described: read the messages printed.",
                    figure=f"unused: {', '.join(names)}")
