"""Exercises of notebook 00_first_launch: `check("00.1", answer)`."""

from ...course.exercises import check, compare_choice, compare_number, exercise  # noqa: F401 - check: the notebook's


@exercise("00.1")
def _busbw(answer):
    # busbw of an all-reduce on 4 ranks that reached algbw = 12 GB/s.
    return compare_number(answer, 12 * 2 * 3 / 4, what="busbw in GB/s")


@exercise("00.2")
def _predicted_time(answer):
    # 0.5 MB (538,628 bytes: the case 2 model's gradients) with 50 us latency and 4 GB/s algbw, in us.
    return compare_number(answer, (50e-6 + 538_628 / 4e9) * 1e6, what="time in microseconds")


@exercise("00.3")
def _which_rank(answer):
    # workers.fail_on(2, "raise") on 4 ranks: which rank does WorkerFailed name?
    return compare_choice(answer, 2, {0: "rank 0 failed too, but only after rank 2: it lost its partner",
                                      1: "rank 1 failed after rank 2 did, as collateral",
                                      3: "rank 3 failed after rank 2 did, as collateral"})
