"""Verdicts on a diagnosis (ddp_lessons.diagnosis.claims): each comes out both ways."""

from ddp_lessons.diagnosis import claims


def test_names_and_omits_each_way():
    both = ["startup", "exposed_allreduce", "outside_steps"]
    assert claims.names(both, ["exposed_allreduce", "outside_steps"], "c").holds
    assert claims.names(both[:2], ["exposed_allreduce", "outside_steps"], "c").fails
    assert claims.omits(both[:2], "outside_steps", "c").holds
    assert claims.omits(both, "outside_steps", "c").fails


def test_ranks_first_both_ways():
    assert claims.ranks_first(["startup", "exposed_allreduce"], "startup", "start-up").holds
    assert claims.ranks_first(["exposed_allreduce", "startup"], "startup", "start-up").fails
    assert claims.ranks_first([], "startup", "start-up").fails
    assert claims.ranks_first(["outside_steps", "startup"], "outside_steps", "evaluation").holds
    assert claims.ranks_first(["startup", "outside_steps"], "outside_steps", "evaluation").fails
    assert claims.ranks_first([], "outside_steps", "evaluation").fails
