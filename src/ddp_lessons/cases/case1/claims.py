"""Case 1's claims, in notebook order: only those whose outcome could go either way on a reader's
machine (`course.claims`). A notebook decides one with `CLAIMS.decide(key, *numbers)`, its numbers
taken by `readout.evaluation_wait` (01) and `scaling.epoch_by_round` (02). Every other check of
01-03 is a count or a recorded figure, printed as a reading; tests/cases/case1 holds their tests.
Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

from ...course.claims import Claim, Claims

CLAIMS = Claims(
    # 01: the posted evaluation on rank 0 alone. A collective cannot finish before every rank joins,
    # but whether this run shows it depends on the evaluation against the all-reduce's own spread
    # (a fast evaluation on a noisy machine leaves it unresolved).
    Claim("rank1_waits_out_evaluation",
          "rank 1 is blocked in its first all-reduce of epoch 1 while rank 0 evaluates",
          "interval", side=">", limit=0.5,
          what="(rank 1's extra time in that all-reduce - the loader restarts' difference) / rank 0's evaluation",
          holds="In this run rank 1 sat in its first all-reduce of the next epoch for over half of rank 0's "
                "evaluation, or longer: the rank that does not evaluate waits out the evaluation.",
          fails="In this run rank 1's first all-reduce of the next epoch was no longer than usual once the "
                "loader restart is taken out: it did not wait out rank 0's evaluation.",
          unresolved="In this run rank 1's extra time in its first all-reduce of the next epoch is within an "
                     "ordinary all-reduce of half the evaluation: it cannot tell whether the rank waited it out.",
          figure="rank 1's extra wait / rank 0's evaluation {lo:.2f} .. {hi:.2f}"),
    # 02: the answer's batch choice. Halving the per-rank batch doubles the steps; whether the epoch
    # grows depends on how much of a step does not shrink with the batch on this machine.
    Claim("halved_epoch_longer",
          "with the per-rank batch halved an epoch takes longer than with the batch kept",
          "separated", faster="a", names=("batch kept", "batch halved"), min_rounds=7,
          holds="On this machine an epoch with the per-rank batch halved took longer than with the batch kept: "
                "a step on half the samples costs more than half a step.",
          fails="On this machine an epoch with the per-rank batch halved took less time than with the batch "
                "kept: a step on half the samples costs less than half a step.",
          unresolved="On this machine the rounds cannot tell which batch choice gives the shorter epoch: the "
                     "middle halves of their rounds overlap, or there are too few rounds.",
          figure="halved / kept per round {lo:.2f} .. {hi:.2f} ({n} rounds)"),
)
