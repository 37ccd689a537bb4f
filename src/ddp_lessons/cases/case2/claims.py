"""Case 2's claims, in notebook order: only those whose outcome could go either way on a reader's
machine (`course.claims`), both in notebook 05. A notebook decides one with `CLAIMS.decide(key, *numbers)`,
its numbers taken by `slowest_epochs`, `breakeven_bounds` and `middle_half` below. Every other check
of 04-06 is a count, a recorded figure or a model's arithmetic, printed as a reading; tests/cases/case2
holds their tests. Defined in notebook 05_case2_where_time_goes.
"""

from __future__ import annotations

import math
import statistics

from ...course.claims import Claim, Claims
from ...tool.spread import quartiles
from .readout import POST_EPOCHS, breakeven_share, epoch_seconds

MIN_REPEATS = 7  # epochs or steps: fewer decide nothing

CLAIMS = Claims(
    # Each rank draws, trains and validates a third of the samples, but what it does per step and per
    # epoch does not shrink, it adds an all-reduce, and on shared cores it runs slower; and Lightning's
    # launch of 3 ranks costs more, once. 3 ranks lose the post's 200 epochs where their epoch keeps more
    # than the break-even share of one process's, 1 - extra launch / (200 x one-process epoch): on two
    # cores they keep about all of it; with a core (or a GPU) per rank the share can fall below.
    Claim("three_ranks_lose_the_posts_run",
          "3 ranks lose the post's 200 epochs: their epoch keeps more of one process's than the launch lets",
          "interval", side=">", limit=1.0, what="(3-rank epoch / one-process epoch) / break-even ratio",
          holds="On this machine 3 ranks lose the post's 200 epochs: their epoch keeps more of the one-process "
                "epoch than would pay for their longer launch.",
          fails="On this machine 3 ranks win the post's 200 epochs: their epoch is short enough to pay for their "
                "longer launch.",
          unresolved="On this machine the epochs on 3 ranks straddle the break-even, or too few epochs ran: this run "
                     "cannot tell whether 3 ranks win the post's 200 epochs.",
          figure="3-rank epoch / one-process epoch, as a share of the break-even {lo:.2f} .. {hi:.2f} "
                 "(quartile bounds; above 1: they lose)"),
    # Per step the first rank in waits for the last; the rest of its interval is the all-reduce itself
    # (slowed, on shared cores, by the other ranks). With a core per rank and even ranks the wait shrinks.
    Claim("waiting_is_a_real_part_of_the_interval",
          "waiting for the last rank is more than a fifth of the first rank's hook interval",
          "interval", side=">", limit=0.2, what="(longest - shortest) / longest per step, middle half",
          holds="On this machine waiting for the last rank is more than a fifth of the first rank's hook interval "
                "in the middle half of the steps: one rank's hook median is not the all-reduce's time.",
          fails="On this machine waiting for the last rank is under a fifth of the first rank's hook interval in "
                "the middle half of the steps: the interval is mostly the all-reduce itself.",
          unresolved="On this machine the waiting share straddles a fifth of the first rank's hook interval across "
                     "the middle half of the steps, or too few steps all-reduced: this run cannot tell.",
          figure="waiting / longest interval {lo:.0%} .. {hi:.0%} (middle half of the steps)"),
)


def slowest_epochs(ranks) -> list[float]:
    """Per epoch (the first left out), the slowest rank's length (s): the epoch every rank waits for.
    Defined in notebook 05_case2_where_time_goes."""
    per_rank = [epoch_seconds(r) for r in ranks]
    return [max(e) for e in zip(*per_rank, strict=True)]


def epoch_ratio_bounds(one_epochs, rank_epochs, min_n: int = MIN_REPEATS) -> tuple[float, float]:
    """(low, high) of the ratio rank epoch / one-process epoch from the two sides' quartiles:
    [Q1(ranks) / Q3(one), Q3(ranks) / Q1(one)]; (0, inf), which decides nothing, with fewer than
    `min_n` epochs on either side. Defined in notebook 05_case2_where_time_goes."""
    if min(len(one_epochs), len(rank_epochs)) < min_n:
        return 0.0, math.inf
    o1, _, o3 = quartiles(one_epochs)
    r1, _, r3 = quartiles(rank_epochs)
    return r1 / o3, r3 / o1


def breakeven_bounds(one_epochs, rank_epochs, extra_launch_s: float, epochs: int = POST_EPOCHS,
                     min_n: int = MIN_REPEATS) -> tuple[float, float]:
    """`epoch_ratio_bounds` as shares of the break-even ratio 1 - extra launch / (epochs x the median
    one-process epoch), the ratio at which N ranks' shorter epochs just pay for their longer launch
    (above 1: they lose). Where the launch alone costs more than the run, (inf, inf): they lose at any
    epoch length. Defined in notebook 05_case2_where_time_goes."""
    low, high = epoch_ratio_bounds(one_epochs, rank_epochs, min_n)
    even = breakeven_share(extra_launch_s, statistics.median(one_epochs), epochs)
    if high == math.inf:
        return low, high
    return (low / even, high / even) if even > 0 else (math.inf, math.inf)


def middle_half(values, min_n: int = MIN_REPEATS) -> tuple[float, float]:
    """(Q1, Q3) of `values`; (0, 1), which no limit between 0 and 1 resolves, with fewer than `min_n`.
    Defined in notebook 05_case2_where_time_goes."""
    if len(values) < min_n:
        return 0.0, 1.0
    q1, _, q3 = quartiles(values)
    return q1, q3
