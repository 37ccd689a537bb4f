"""case1.plan.core_budget: a rank's loader workers plus intra-op threads fit its share of cores."""

import pytest

from ddp_lessons.tool import runtime
from ddp_lessons.cases.case1 import Options
from ddp_lessons.cases.case1 import plan


@pytest.mark.parametrize("cores, ranks, device, num_workers, cap, expected", [
    # one H200 on 16 cores: 8 workers decode (the cap), the rank's own thread queues kernels, and
    # 7 cores stay for the pin-memory thread, NCCL's proxy and the driver
    (16, 1, "cuda", "cores", 16, (8, 1)),
    (16, 2, "cuda", "cores", 8, (7, 1)),
    (64, 2, "cuda", "cores", None, (8, 1)),
    (16, 8, "cuda", "cores", None, (1, 1)),
    (16, 16, "cuda", "cores", None, (0, 1)),
    # the 2-core CI machine, notebook 03: launch(world_size=2, threads=1) -> 1 core per rank
    (2, 2, "cpu", "cores", 1, (0, 1)),
    # ... and its one-rank run, launch(world_size=1, threads=1): 1 worker + 1 thread on 2 cores
    (2, 1, "cpu", "cores", 1, (1, 1)),
    (2, 1, "cpu", "cores", None, (1, 1)),
    (5, 1, "cpu", "cores", None, (2, 3)),
    (16, 1, "cpu", "cores", None, (4, 12)),
    (16, 2, "cpu", "cores", 8, (2, 6)),
    (16, 1, "cpu", "cores", 4, (4, 4)),       # the launcher's threads cap the threads
    (1, 4, "cpu", "cores", None, (0, 1)),     # fewer cores than ranks: still one thread
    # an explicit count is kept as given; the threads yield to it, down to 1
    (2, 2, "cpu", 4, 1, (4, 1)),
    (16, 1, "cpu", 8, None, (8, 8)),
    (16, 1, "cuda", 4, 16, (4, 1)),
    (16, 1, "cpu", 0, None, (0, 16)),
])
def test_core_budget(cores, ranks, device, num_workers, cap, expected):
    assert plan.core_budget(cores, ranks, device, num_workers, cap) == expected


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_cores_never_double_booked(device):
    for cores in range(1, 65):
        for ranks in range(1, 9):
            workers, threads = plan.core_budget(cores, ranks, device)
            assert workers >= 0 and threads >= 1
            assert workers + threads <= max(1, cores // ranks), (cores, ranks, workers, threads)


def test_rank_budget_reads_the_launchers_environment(monkeypatch):
    monkeypatch.setattr(runtime, "cpu_count", lambda: 2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert plan.rank_budget(Options.fixed(), "cpu") == (0, 1)
    assert plan.rank_budget(Options.broken(), "cpu") == (4, 1)
    monkeypatch.setattr(runtime, "cpu_count", lambda: 16)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "16")
    assert plan.rank_budget(Options.fixed(), "cuda") == (8, 1)
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert plan.rank_budget(Options.fixed(), "cpu") == (4, 12)


def test_a_gpu_rank_gets_at_most_8_loader_workers():
    # common practice is 4 to 8 per rank, tuned by the data wait; the rest of the share is left to the
    # pin-memory thread, NCCL's proxy thread and the driver
    assert plan.MAX_GPU_WORKERS == 8
    for cores in range(1, 257):
        for ranks in (1, 2, 4, 8):
            workers, _ = plan.core_budget(cores, ranks, "cuda")
            assert workers == min(max(1, cores // ranks) - 1, 8), (cores, ranks, workers)
    assert plan.core_budget(16, 1, "cuda", num_workers=12) == (12, 1)   # an explicit count is kept as given
