"""Notebook 07's workload (ddp_lessons.cases.own): options, data, model, the GPU record's reader."""

import pytest
import torch

from ddp_lessons import launch
from ddp_lessons.cases.own import accumulate, gpu, unused
from ddp_lessons.cases.own.data import SyntheticCIFAR
from ddp_lessons.cases.own.model import SmallResNet
from ddp_lessons.cases.own.options import Options


def test_options_refuse_nonsense_and_the_fix_is_five_switches():
    with pytest.raises(ValueError, match="evaluation='rank0'"):
        Options(evaluation="rank0")
    assert set(Options.fixed().diff(Options.broken())) == {"evaluation", "set_epoch", "step_log", "num_workers",
                                                                    "persistent_workers"}


def test_data_is_cifar_shaped_and_deterministic():
    a, b = SyntheticCIFAR(8, seed=1, augment=False), SyntheticCIFAR(8, seed=1, augment=False)
    x, y = a[3]
    assert x.shape == (3, 32, 32) and x.dtype == torch.float32 and 0 <= y < 10
    assert torch.equal(x, b[3][0])
    assert SyntheticCIFAR(8, augment=True)[0][0].shape == (3, 32, 32)


def test_the_unused_branch_is_found_by_running_the_model():
    assert unused.unused_names(SmallResNet(width=4, with_unused_branch=True)) == ["aux_head.weight", "aux_head.bias"]
    assert unused.unused_names(SmallResNet(width=4)) == []


def test_nccl_lines_are_sorted_by_subject():
    groups = gpu.sort_nccl(["[0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
                            "[0] NCCL INFO Bootstrap: Using lo:127.0.0.1<0>",
                            "[0] NCCL INFO Channel 01/64 : 0", "[0] NCCL INFO something else"])
    assert [len(groups[k]) for k in ("transport to a peer", "network for bootstrap and proxies",
                                     "channels, rings and trees", "other")] == [1, 1, 1, 1]


@pytest.mark.slow
def test_no_sync_accumulation_gives_the_large_batch_gradient_with_one_allreduce():
    acc = launch(accumulate.accumulate, kwargs={"k": 3}, world_size=2, threads=1, backend="gloo")[0]
    assert acc["allreduce_calls"] == 1 and acc["max_abs_diff"] <= 1e-5 * acc["max_abs_grad"]


def test_a_run_that_lowered_the_threads_does_not_lower_the_next_runs():
    from ddp_lessons.cases.own import plan
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)            # the launcher's share of the cores for this rank
        plan.launch_threads.cache_clear()
        broken = Options.broken()
        assert plan.workers_and_threads(broken, "cpu", 2)[1] == 2
        torch.set_num_threads(1)            # what a fixed run leaves behind in the process
        assert plan.workers_and_threads(broken, "cpu", 2)[1] == 2
    finally:
        torch.set_num_threads(before)
        plan.launch_threads.cache_clear()
