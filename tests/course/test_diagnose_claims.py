"""Verdicts on a diagnosis (ddp_lessons.course.diagnosis_verdicts): each comes out both ways."""

from ddp_lessons.course import diagnosis_verdicts


def test_names_each_way():
    both = ["startup", "exposed_allreduce", "outside_steps"]
    assert diagnosis_verdicts.names(both, ["exposed_allreduce", "outside_steps"], "c").holds
    assert diagnosis_verdicts.names(both[:2], ["exposed_allreduce", "outside_steps"], "c").fails


def test_ranks_first_both_ways():
    assert diagnosis_verdicts.ranks_first(["startup", "exposed_allreduce"], "startup", "start-up").holds
    assert diagnosis_verdicts.ranks_first(["exposed_allreduce", "startup"], "startup", "start-up").fails
    assert diagnosis_verdicts.ranks_first([], "startup", "start-up").fails
    assert diagnosis_verdicts.ranks_first(["outside_steps", "startup"], "outside_steps", "evaluation").holds
    assert diagnosis_verdicts.ranks_first(["startup", "outside_steps"], "outside_steps", "evaluation").fails
    assert diagnosis_verdicts.ranks_first([], "outside_steps", "evaluation").fails
