"""The core budget of notebook 07 (ddp_lessons.cases.own.cores): each rank's share of the cores, and on a GPU
at most `MAX_WORKERS` loader workers however many cores are spare."""

import pytest

from ddp_lessons.cases.own import cores


@pytest.mark.parametrize("n_cores, ranks, workers", [(16, 4, 3), (16, 2, 7), (16, 1, 8), (64, 1, 8), (128, 8, 8),
                                                     (2, 2, 0)])
def test_a_gpu_rank_gets_its_share_less_one_thread_as_workers_at_most_eight(n_cores, ranks, workers):
    b = cores.budget(n_cores, ranks, "cuda")
    assert b["workers"] == workers and b["threads"] == 1 and not b["oversubscribed"]


def test_one_gpu_rank_on_16_cores_leaves_cores_spare_for_the_other_threads():
    # 15 workers before the cap: nothing left for the pin-memory thread, NCCL's proxy or the driver
    b = cores.budget(16, 1, "cuda")
    assert cores.MAX_WORKERS == 8 and b["busy"] == 9 and b["cores"] - b["busy"] == 7


def test_cpu_ranks_keep_most_of_their_share_for_torch_threads():
    assert {k: cores.budget(16, 2, "cpu")[k] for k in ("workers", "threads")} == {"workers": 2, "threads": 6}
    assert cores.budget(2, 2, "cpu")["workers"] == 0


def test_the_budget_refuses_nonsense():
    with pytest.raises(ValueError, match="cores=0"):
        cores.budget(0, 1, "cuda")
    with pytest.raises(ValueError, match="device_type"):
        cores.budget(4, 1, "tpu")
