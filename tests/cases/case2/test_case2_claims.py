"""Case 2's claims (`case2.claims.CLAIMS`): each one fed a plausible counter-example sees it not hold,
and numbers like a run's see it hold; the readouts that take their numbers from a run."""

import pytest

from ddp_lessons.cases.case2 import claims as C
from ddp_lessons.cases.case2 import hook_intervals as H
from ddp_lessons.tool.verdict import FAILS, HOLDS, UNRESOLVED

ONE = [0.40, 0.41, 0.39, 0.42, 0.40, 0.43, 0.41, 0.40]      # one process, s per epoch (8 epochs after the first)
THREE = [0.20, 0.21, 0.19, 0.22, 0.20, 0.24, 0.21, 0.20]    # 3 ranks, slowest rank per epoch


def test_the_table_is_in_notebook_order_and_every_claim_has_a_sentence_per_outcome():
    assert list(C.CLAIMS) == ["three_ranks_lose_the_posts_run", "waiting_is_a_real_part_of_the_interval"]
    for claim in C.CLAIMS.values():
        assert claim.holds and claim.fails and claim.unresolved
        for sentence in (claim.holds, claim.fails, claim.unresolved):
            assert not any(ch.isdigit() for ch in sentence.replace("3 ranks", "").replace("200 epochs", ""))  # fixed


# -- 05: an epoch on 3 ranks against one process ---------------------------------------------
def _breakeven(one, ranks):
    return C.CLAIMS.decide("three_ranks_lose_the_posts_run", *C.breakeven_bounds(one, ranks, LAUNCH))


LAUNCH = 3.3   # s more for Lightning's 3-rank launch, as recorded on 2 CPU cores: break-even at 1 - 3.3 / 80


def test_three_ranks_lose_the_posts_run_holds_when_three_ranks_share_two_cores():
    # what two cores give: a third of the samples each, at two thirds of a core, plus the all-reduce
    shared = [x * 1.0 for x in ONE]
    v = _breakeven(ONE, shared)
    assert v.status == HOLDS and "3 ranks lose" in str(v)


def test_three_ranks_lose_the_posts_run_fails_when_each_rank_has_a_core_of_its_own():
    # a core (or a GPU) per rank: the epoch falls near a third of one process's, and pays the launch back
    own = [x * 0.38 for x in ONE]
    v = _breakeven(ONE, own)
    assert v.status == FAILS and "3 ranks win" in str(v)


def test_three_ranks_lose_the_posts_run_is_unresolved_with_too_few_epochs_or_a_straddle():
    assert C.epoch_ratio_bounds(ONE[:4], THREE[:4]) == (0.0, float("inf"))
    assert _breakeven(ONE[:4], THREE[:4]).status == UNRESOLVED
    # epochs around the break-even share (1 - 3.3 / (200 x 0.405) = 0.96 of one process's)
    assert _breakeven(ONE, [x * 0.96 for x in ONE]).status == UNRESOLVED


def test_a_launch_longer_than_the_run_loses_at_any_epoch_length():
    assert C.breakeven_bounds(ONE, [x * 0.1 for x in ONE], extra_launch_s=500.0) == (float("inf"), float("inf"))


def test_epoch_ratio_bounds_are_the_quartile_bounds():
    low, high = C.epoch_ratio_bounds([1.0] * 7, [0.5] * 7)
    assert (low, high) == pytest.approx((0.5, 0.5))


def test_slowest_epochs_takes_the_slowest_rank_and_leaves_the_first_epoch_out():
    def rank(lengths):
        return {"timer": {"steps": [{"step_time": 1.0}], "epochs": [{"train": x, "validation": 0.01}
                                                                    for x in lengths]}}
    assert C.slowest_epochs([rank([5.0, 0.2, 0.3]), rank([4.0, 0.25, 0.1])]) == pytest.approx([0.26, 0.31])


# -- 05: the hook interval, waiting against the all-reduce itself --------------------------------
def _times(rank, intervals, epochs=2):
    steps = [{"step": i, "allreduce": x, "allreduce_calls": int(x > 0)} for i, x in enumerate(intervals)]
    return {"rank": rank, "steps": steps, "epochs": [{}] * epochs}


def _ranks(first_in, last_in, n=9):
    """Three ranks over `n` synced steps: per step the first rank in sees `first_in`, the last `last_in`."""
    skip = [0.05, 0.0]
    return [_times(0, skip + [first_in] * n), _times(1, skip + [(first_in + last_in) / 2] * n),
            _times(2, skip + [last_in] * n)]


def _waiting(read):
    return C.CLAIMS.decide("waiting_is_a_real_part_of_the_interval", *C.middle_half(read["waiting_share"]))


def test_waiting_is_a_real_part_of_the_interval_holds_on_the_review_s_table():
    # the review's table: the last rank in (no wait) took 8.1 ms of the first rank's 13.0 ms: 38% waiting
    v = _waiting(H.per_rank(_ranks(first_in=0.0130, last_in=0.0081)))
    assert v.status == HOLDS and "is not the all-reduce's time" in str(v)


def test_waiting_is_a_real_part_of_the_interval_fails_when_the_ranks_arrive_together():
    # a core per rank, even ranks: every rank hands its bucket over within a tenth of the all-reduce
    v = _waiting(H.per_rank(_ranks(first_in=0.0110, last_in=0.0100)))
    assert v.status == FAILS and "mostly the all-reduce itself" in str(v)


def test_waiting_is_a_real_part_of_the_interval_is_unresolved_with_too_few_steps():
    read = H.per_rank(_ranks(first_in=0.013, last_in=0.002, n=4))
    assert C.middle_half(read["waiting_share"]) == (0.0, 1.0)
    assert _waiting(read).status == UNRESOLVED


def test_hook_intervals_per_rank_and_the_two_terms():
    ranks = [_times(0, [0.05, 0, 0.004, 0.010]), _times(1, [0.05, 0, 0.006, 0.002]),
             _times(2, [0.05, 0, 0.020, 0.030])]
    read = H.per_rank(ranks, skip=1)
    assert [r["median"] for r in read["ranks"]] == pytest.approx([0.007, 0.004, 0.025])
    assert read["shortest_per_step"] == pytest.approx([0.004, 0.002])     # steps 2 and 3
    assert read["longest_per_step"] == pytest.approx([0.020, 0.030])
    assert read["waiting_share"] == pytest.approx([0.8, 28 / 30])
    assert (read["shortest"], read["longest"]) == pytest.approx((0.003, 0.025))
    assert H.per_epoch(ranks) == pytest.approx([0.032, 0.029, 0.05])
    text = H.table(read, alone_s=0.001)
    assert "rank 2: median  25.00 ms" in text and "contention: the shortest interval is 3.0x" in text
    with pytest.raises(ValueError, match="no all-reduce after step"):
        H.per_rank([_times(0, [0.05, 0, 0])], skip=1)
