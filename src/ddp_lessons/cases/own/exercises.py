"""Exercises of notebook 07_diagnose_your_own_run: `check("07.1", answer)`."""

from ...course.exercises import check, compare_number, exercise  # noqa: F401 - check: the notebook's
from .cores import budget


@exercise("07.1")
def _workers(answer):
    # 4 GPU ranks on a machine with 16 cores: loader workers per rank within the core budget.
    return compare_number(answer, budget(16, 4, "cuda")["workers"], rel_right=0, rel_close=0.34,
                          what="loader workers per rank")


@exercise("07.2")
def _global_batch(answer):
    # no_sync accumulation: micro-batch 8 per rank, 4 micro-batches per step, 8 ranks.
    return compare_number(answer, 8 * 4 * 8, rel_right=0, what="samples per optimizer step")


@exercise("07.3")
def _epoch(answer):
    # 2 ranks, every rank evaluates the whole test set: per epoch 6 s training, 4 s evaluation.
    # Split the evaluation between the ranks (the all-reduce of two counts costs nothing here).
    return compare_number(answer, 6 + 4 / 2, what="epoch time in seconds")
