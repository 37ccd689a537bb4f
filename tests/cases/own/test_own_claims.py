"""Notebook 07's claims (ddp_lessons.cases.own.verdicts): each comes out each way on numbers made for it."""

import pytest

from ddp_lessons.tool import verdict as v
from ddp_lessons.cases.own import verdicts, cores, readout


def test_same_order_each_epoch():
    assert verdicts.same_order_each_epoch([[3, 1, 2], [3, 1, 2]]).holds
    assert verdicts.same_order_each_epoch([[3, 1, 2], [2, 3, 1]]).fails


def test_every_rank_evaluates_everything():
    assert verdicts.every_rank_evaluates_everything([1024, 1024], 1024).holds
    assert verdicts.every_rank_evaluates_everything([512, 512], 1024).fails


def test_evaluation_share_large():
    assert verdicts.evaluation_share_large([0.4, 0.5, 0.45, 0.42, 0.48]).holds
    assert verdicts.evaluation_share_large([0.05, 0.1, 0.08, 0.06, 0.09]).fails
    assert verdicts.evaluation_share_large([0.1, 0.3, 0.2, 0.25, 0.15]).status == v.UNRESOLVED
    assert verdicts.evaluation_share_large([0.5]).status == v.UNRESOLVED   # one run: no spread


def test_speedup_below():
    assert verdicts.speedup_below([1.0, 1.1, 0.9, 1.0, 1.05], [0.9, 1.0, 0.8, 0.9, 0.95]).holds      # about 1.1x
    assert verdicts.speedup_below([2.0, 2.1, 1.9, 2.0, 2.2], [1.0] * 5).fails      # about 2x
    assert verdicts.speedup_below([2.0, 1.0, 1.0, 1.0, 1.0], [1.0] * 5).status == v.UNRESOLVED


def test_fix_is_faster_and_step_is_shorter():
    assert verdicts.fix_is_faster([2.0, 2.1, 1.9, 2.05, 1.95], [1.2, 1.3, 1.1, 1.25, 1.15], 2).holds
    assert verdicts.fix_is_faster([1.2, 1.3, 1.1, 1.25, 1.15], [2.0, 2.1, 1.9, 2.05, 1.95], 2).fails
    assert verdicts.step_is_shorter([1.0] * 5, [1.1, 0.9, 1.0, 1.05, 0.95], "one GPU").status == v.UNRESOLVED


def test_evaluation_not_split():
    assert verdicts.evaluation_not_split([1.0, 1.0, 1.0], [[1.0, 1.1], [0.9, 1.0], [1.0, 1.0]]).holds
    assert verdicts.evaluation_not_split([1.0, 1.0, 1.0], [[0.5, 0.5], [0.52, 0.49], [0.5, 0.5]]).fails


def _costs(dup, other):
    return [[{"rank": r, "duplicated evaluation": dup, "data wait": other, "per-step logging": 0.0,
              "exposed all-reduce": 0.0} for r in (0, 1)] for _ in range(5)]


def test_largest_cost():
    assert verdicts.largest_cost(_costs(0.5, 0.1), "duplicated evaluation").holds
    assert verdicts.largest_cost(_costs(0.1, 0.5), "duplicated evaluation").fails
    # decided on each round's sum over the ranks: one rank's swollen wait in one round does not undo it
    swollen = _costs(0.5, 0.1)
    swollen[0][1]["exposed all-reduce"] = 0.6
    assert verdicts.largest_cost(swollen, "duplicated evaluation").holds
    swollen[0][0]["exposed all-reduce"] = 0.6
    assert verdicts.largest_cost(swollen, "duplicated evaluation").status == "not resolvable here"


def test_gradients_allreduces_names_transport():
    assert verdicts.same_gradients(3e-8, 0.1).holds and verdicts.same_gradients(1e-3, 0.1).fails
    assert verdicts.fewer_allreduces(1, 4).holds and verdicts.fewer_allreduces(4, 4).fails
    names = ["aux_head.weight", "aux_head.bias"]
    assert verdicts.names_parameters("did not receive grad: aux_head.bias, aux_head.weight", names).holds
    assert verdicts.names_parameters("Parameter indices which did not receive grad: 62 63", names).fails
    assert verdicts.names_parameters(None, names).fails
    assert verdicts.no_peer_transport(["[0] NCCL INFO Channel 00/64 : 0"], 1).holds
    assert verdicts.no_peer_transport(["[0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"], 2).fails
    assert verdicts.mostly_idle(94.2).holds and verdicts.mostly_idle(10.0).fails


@pytest.mark.parametrize("cores_, ranks, dev, workers, threads", [
    (2, 1, "cpu", 1, 1), (2, 2, "cpu", 0, 1), (16, 1, "cuda", 15, 1), (16, 4, "cuda", 3, 1), (3, 4, "cuda", 0, 1)])
def test_core_budget_fits_the_share(cores_, ranks, dev, workers, threads):
    b = cores.budget(cores_, ranks, dev)
    assert (b["workers"], b["threads"]) == (workers, threads)
    assert b["workers"] + b["threads"] <= max(1, b["share"])


def test_oversubscribed_and_bad_budget():
    assert verdicts.oversubscribed(cores.load(2, 2, 4, 2)).holds
    assert verdicts.oversubscribed(cores.load(16, 2, 3, 1)).fails
    with pytest.raises(ValueError, match="cores=0"):
        cores.budget(0, 2, "cpu")
    with pytest.raises(ValueError, match="device_type"):
        cores.budget(2, 2, "gpu")


def test_costs_rank_duplicated_evaluation_only_when_duplicated():
    rank = {"rank": 0, "world_size": 2, "eval_s": 1.0, "data_s": 0.2, "log_s": 0.0, "exposed_s": 0.1}
    assert readout.costs([rank], duplicated=True)[0]["duplicated evaluation"] == 0.5
    assert readout.costs([rank], duplicated=False)[0]["duplicated evaluation"] == 0.0
    assert readout.ranked(readout.costs([rank], True))[0][0] == "duplicated evaluation"


def test_coverage_is_the_named_share_of_each_wall():
    def acc(steps, outside, wall):
        return {"steps": steps, "outside": {"eval": outside}, "wall": wall}
    assert verdicts.coverage([acc(0.6, 0.38, 1.0), acc(1.0, 0.0, 2.0), acc(0, 0, 0)]) == [0.98, 0.5]


def test_set_epoch_and_debug_levels_each_way():
    same, new = [[1, 2, 3], [1, 2, 3]], [[1, 2, 3], [3, 1, 2]]
    assert verdicts.set_epoch_reshuffles(same, new).holds
    assert verdicts.set_epoch_reshuffles(new, new).fails and verdicts.set_epoch_reshuffles(same, same).fails
    assert "reshuffles" in verdicts.set_epoch_reshuffles(same, new).sentence
    names = ["aux_head.bias", "aux_head.weight"]
    named = "Parameters which did not receive grad: aux_head.bias, aux_head.weight"
    assert verdicts.debug_levels({"OFF": "indices 62 63", "INFO": named}, names).holds
    assert verdicts.debug_levels({"OFF": named, "INFO": named}, names).fails
    assert verdicts.debug_levels({"OFF": "indices", "INFO": "indices"}, names).fails
