"""Case 1's verdicts: every claim comes out each way it can, on made-up numbers."""

import copy
import json
from pathlib import Path

import pytest
import torch

from ddp_lessons.tool import verdict as V
from ddp_lessons.cases.case1 import ablation, buckets, readout, verdicts
from ddp_lessons.cases.case1.loop import graph_nodes

ROOT = Path(__file__).resolve().parents[3]
H, F, U = V.HOLDS, V.FAILS, V.UNRESOLVED


def test_split_disjoint_every_outcome():
    assert verdicts.split_disjoint([[1, 2], [3, 4]], 4).holds
    assert verdicts.split_disjoint([[1, 2], [2, 3]], 3).fails          # a question on both ranks
    assert verdicts.split_disjoint([[1, 2], [3]], 4).fails             # one question never seen


def _rounds(one, two, batch=(8, 8)):
    return {"1 worker": one, "2 workers": two, "batch": batch}


def test_two_workers_not_twice_as_fast_every_outcome():
    one = [10, 10.5, 11, 11.5, 12]
    assert verdicts.two_workers_not_twice_as_fast(_rounds(one, [20, 21, 22, 23, 24])).holds
    assert verdicts.two_workers_not_twice_as_fast(_rounds(one, [5, 6, 7, 8, 9])).fails
    assert verdicts.two_workers_not_twice_as_fast(_rounds(one, [9, 12, 11, 12, 13])).status == U  # a round each way
    assert verdicts.two_workers_not_twice_as_fast(_rounds(one[:2], [20, 21])).status == U        # too few rounds


def _edge(e0, ar0, ar1, d0=0.1, d1=0.1, usual=(0.05, 0.06, 0.07, 0.08)):
    return [{"rank": 0, "eval_time": e0, "first_allreduce": ar0, "first_data": d0, "usual_allreduce": list(usual)},
            {"rank": 1, "eval_time": 0.0, "first_allreduce": ar1, "first_data": d1, "usual_allreduce": list(usual)}]


def test_eval_wait_every_outcome():
    assert verdicts.eval_wait(_edge(1.0, 0.05, 1.0)).holds                 # rank 1 blocked ~ the evaluation
    assert verdicts.eval_wait(_edge(1.0, 0.05, 0.06)).fails                # nobody waits (shared evaluation)
    assert verdicts.eval_wait(_edge(1.0, 0.05, 0.55)).status == U          # half of it, within the margin
    # the loader restart is taken out: rank 0's slow restart explains rank 1's wait, not the evaluation
    assert verdicts.eval_wait(_edge(1.0, 0.05, 1.0, d0=0.9, d1=0.0)).fails
    with pytest.raises(ValueError, match="did not evaluate"):
        verdicts.eval_wait(_edge(0.0, 0.05, 1.0))


def test_epoch_boundary_reads_the_first_step_of_epoch_1():
    steps = [{"step_time": 1, "data": 0.01, "allreduce": a} for a in (9, 9, 0.1, 0.2, 5.0, 0.3, 0.4)]
    res = [{"rank": 0, "steps_per_epoch": 4, "timer": {"steps": steps},
            "epochs": [{"eval_time": 2.0}, {"eval_time": 1.0}]}]
    (row,) = readout.epoch_boundary(res)
    assert row["first_allreduce"] == 5.0 and row["eval_time"] == 2.0
    assert row["usual_allreduce"] == [0.1, 0.2, 0.3, 0.4]


def test_exact_counts_every_outcome_and_their_sentences():
    assert verdicts.same_split([174, 174], [174, 174]).holds
    assert verdicts.same_split([174, 174], [348, 348]).fails
    assert verdicts.only_rank0_logs([2, 0]).holds
    assert verdicts.only_rank0_logs([2, 2]).fails
    v = verdicts.unused_heads_crash("RuntimeError: Expected to have finished reduction in the prior iteration")
    assert v.holds and "crashes this model" in str(v).splitlines()[0]
    assert verdicts.unused_heads_crash(None).fails
    assert verdicts.unused_heads_crash("ValueError: other").fails
    assert verdicts.every_rank_counts_all([52, 52], 52).holds
    f = verdicts.every_rank_counts_all([26, 26], 52)
    assert f.fails and "with the evaluation distributed, some rank" in str(f).lower()


def test_worded_sentences_are_true_for_their_outcome():
    # each outcome prints its own sentence, never the holding one when the claim fails
    one = [10, 10.5, 11, 11.5, 12]
    held = verdicts.two_workers_not_twice_as_fast(_rounds(one, [20, 21, 22, 23, 24]))
    failed = verdicts.two_workers_not_twice_as_fast(_rounds(one, [5, 6, 7, 8, 9]))
    assert "does not halve" in str(held) and "does not halve" not in str(failed) and "halves the epoch" in str(failed)
    assert str(held).splitlines()[1].startswith("  deciding numbers: 2 / 1 worker step")
    for v in (held, failed):
        assert str(v).startswith("verdict: On this CPU machine")


def test_epoch_longer_halved_every_outcome():
    kept = [4.0, 4.2, 4.1, 4.3, 4.15]
    assert verdicts.epoch_longer_halved(kept, [8.0, 8.1, 8.3, 7.9, 8.2]).holds
    assert verdicts.epoch_longer_halved(kept, [3.0, 3.1, 3.3, 2.9, 3.2]).fails
    assert verdicts.epoch_longer_halved(kept, [5.0, 3.0, 4.5, 4.0, 3.5]).status == U
    assert verdicts.epoch_longer_halved(kept[:4], [8.0, 8.1, 8.3, 7.9]).status == U    # too few rounds


def test_bytes_change_only_with_every_outcome():
    rows = [{"variant": "posted", "allreduce_bytes": 10}, {"variant": "alone: 1", "allreduce_bytes": 10},
            {"variant": "alone: 4a heads", "allreduce_bytes": 6}, {"variant": "up to: 4b", "allreduce_bytes": 6}]
    assert verdicts.bytes_change_only_with(rows, "4a").holds
    bad = copy.deepcopy(rows)
    bad[1]["allreduce_bytes"] = 8
    assert verdicts.bytes_change_only_with(bad, "4a").fails
    none = [dict(r, allreduce_bytes=10) for r in rows]
    assert verdicts.bytes_change_only_with(none, "4a").fails


def test_core_overbooked_both_ways():
    assert verdicts.core_overbooked(8, 1, 2, 2, "num_workers=8", "m").holds
    assert verdicts.core_overbooked(15, 1, 16, 1, "c", "m").fails      # the budget: exactly the share
    assert verdicts.core_overbooked(16, 16, 16, 1, "c", "m").holds
    assert "fits" in str(verdicts.core_overbooked(15, 1, 16, 1, "c", "the H200 machine")).splitlines()[0]


def test_distributed_count_equal_every_outcome():
    single = [26, 0, 25, 11]
    assert verdicts.distributed_count_equal(single, [26, 0, 25, 11], "c").holds
    assert verdicts.distributed_count_equal(single, [27, 0, 25, 11], "c").fails    # a padded repeat
    assert verdicts.distributed_count_equal([26, 0, 25, 0], [26, 0, 25, 0], "c").status == U   # 0 right
    assert verdicts.distributed_count_equal([26, 26, 25, 25], [26, 26, 25, 25], "c").status == U  # all right


def test_scaling_below_every_outcome():
    one = [10, 10, 10, 10, 10]
    assert verdicts.scaling_below(_rounds(one, [20] * 5), limit=0.8).holds     # 50%
    assert verdicts.scaling_below(_rounds(one, [10] * 5), limit=0.8).fails     # 100%
    assert verdicts.scaling_below(_rounds(one, [9, 10, 12, 14, 15]), limit=0.8).status == U
    # the limit notebook 03 uses: perfect scaling (1.0); superlinear steps make it fail
    assert verdicts.scaling_below(_rounds(one, [12] * 5), limit=1.0).holds      # 83%
    assert verdicts.scaling_below(_rounds(one, [8] * 5), limit=1.0).fails       # 125%
    assert verdicts.scaling_below(_rounds(one, [20] * 5, batch=(8, 16)), limit=1.0).status == U  # batch counted


def test_padded_sampler_really_counts_differently():
    # the counter-example the notebook shows: DistributedSampler pads 51 questions to 2 x 26
    from torch.utils.data.distributed import DistributedSampler
    idx = [i for r in range(2) for i in DistributedSampler(range(51), num_replicas=2, rank=r, shuffle=False)]
    from ddp_lessons.cases.case1.evaluate import ShardSampler
    shard = [i for r in range(2) for i in ShardSampler(51, r, 2)]
    assert sorted(shard) == list(range(51)) and len(idx) == 52


# -- buckets -------------------------------------------------------------------
def test_assign_closes_a_bucket_at_the_cap():
    order = [("a", 600_000), ("b", 600_000), ("c", 100), ("emb", 13_000_000)]
    assert [len(b) for b in buckets.assign(order, 1)] == [2, 2]
    assert [len(b) for b in buckets.assign(order, 25)] == [4]


def test_late_tensor_exposed_both_ways():
    late = [("a", 1_000_000), ("b", 1_000_000), ("emb", 13_000_000)]
    early = [("emb", 13_000_000), ("a", 1_000_000), ("b", 1_000_000)]
    assert verdicts.late_tensor_exposed(late).holds
    assert verdicts.late_tensor_exposed(early).fails
    assert "In the tiny CPU stand-in" in str(verdicts.late_tensor_exposed(late, model="the tiny CPU stand-in"))
    # the M3AE-size shape: the embedding last but ~10% of the bytes -> the claim fails there
    m3ae = [(f"layer{i}", 28_000_000) for i in range(48)] + [("emb", 154_000_000)]
    assert verdicts.late_tensor_exposed(m3ae).fails
    assert buckets.last_bucket_share(early, 1) == pytest.approx(2 / 15)


def test_calls_match_both_ways():
    order = [("a", 600_000), ("b", 600_000), ("emb", 13_000_000)]
    assert verdicts.calls_match(order, {1: 2, 25: 1}).holds
    assert verdicts.calls_match(order, {1: 3, 25: 1}).fails


def test_ready_order_is_the_backward_order():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, batch):
            return self.m(batch["x"])
    order = buckets.ready_order(Wrap(), {"x": torch.ones(2, 3)})
    assert [n.split(".", 1)[1] for n, _ in order][:2] in (["1.bias", "1.weight"], ["1.weight", "1.bias"])
    assert order[-1][0].startswith("m.0.") and sum(b for _, b in order) == (3 * 4 + 4 + 4 * 2 + 2) * 4


# -- the recorded GPU pairs ----------------------------------------------------------
def _record(a_times, b_times):
    runs = []
    for i, (x, y) in enumerate(zip(a_times, b_times, strict=True)):
        for name, t in (("A", x), ("B", y)):
            steps = [t * (1 + 0.01 * (k % 3)) for k in range(10)]
            runs.append({"name": name, "round": i, "ok": True, "skip": 2, "step_times": steps,
                         "parts": {"data": 0.01 * t}})
    return {"results": {"rounds_done": len(a_times), "runs": runs},
            "machine": {"gpus": ["G"], "cpu_count": 4, "torch": "t", "nccl": "n"},
            "config": {"world_size": 1, "args": {"model": "m", "batch": 1, "steps": 10, "skip": 2}},
            "created": "2026-01-01T00:00"}


def _named(rec, a, b):
    for r in rec["results"]["runs"]:
        r["name"] = a if r["name"] == "A" else b
    return rec


def test_worded_gpu_pairs_every_outcome():
    faster, slower = [0.8, 0.9, 0.85, 0.82, 0.88], [1.2, 1.1, 1.3, 1.15, 1.25]
    assert verdicts.autocast_faster(_named(_record([1] * 5, faster), "fixed", "fixed-bf16")).holds
    assert verdicts.autocast_faster(_named(_record([1] * 5, slower), "fixed", "fixed-bf16")).fails
    assert verdicts.all_fixes_faster(_named(_record([1] * 5, faster), "broken", "fixed")).holds
    assert verdicts.all_fixes_faster(_named(_record([1] * 5, slower), "broken", "fixed")).fails
    item = verdicts.item_sync_costs(_named(_record([1] * 5, slower), "fixed-bf16", "fixed-bf16-item"))
    assert item.holds and str(item).startswith("verdict: On the recorded H200")
    assert verdicts.item_sync_costs(_named(_record([1] * 5, faster), "fixed-bf16", "fixed-bf16-item")).fails
    mixed = verdicts.item_sync_costs(_named(_record([1] * 5, [0.8, 1.2, 0.9, 1.1, 0.95]), "fixed-bf16",
                                            "fixed-bf16-item"))
    assert mixed.status == U and "some rounds" in str(mixed)
    assert verdicts.ratios(_named(_record([1] * 5, faster), "a", "b"), "a", "b") == pytest.approx(faster)


def test_pair_every_outcome():
    assert verdicts.pair(_record([1] * 5, [0.8, 0.9, 0.85, 0.82, 0.88]), "A", "B", "c").holds
    assert verdicts.pair(_record([1] * 5, [1.2, 1.1, 1.3, 1.15, 1.25]), "A", "B", "c").fails
    assert verdicts.pair(_record([1] * 5, [0.8, 1.2, 0.9, 0.85, 0.95]), "A", "B", "c").status == U
    assert verdicts.pair(_record([1] * 4, [0.8, 0.9, 0.85, 0.82]), "A", "B", "c").status == U     # 4 rounds
    with pytest.raises(KeyError, match="use one of"):
        verdicts.round_medians(_record([1], [1]), "C")


def test_unsteady_and_loader_share():
    rec = _record([1] * 5, [1] * 5)
    assert verdicts.unsteady(rec) == []
    rec["results"]["runs"][0]["step_times"] = [1, 1, 1, 1.5, 0.5, 1.5, 0.5, 1.5, 0.5, 1]
    assert [(n, r) for n, r, _ in verdicts.unsteady(rec)] == [("A", 0)]
    assert verdicts.loader_keeps_up(rec, "B").holds
    rec2 = _record([1] * 5, [1] * 5)
    for r in rec2["results"]["runs"]:
        r["parts"]["data"] = 0.5
    assert verdicts.loader_keeps_up(rec2, "B").fails


def test_the_stored_pairs_record_reads():
    rec = json.loads((ROOT / "data" / "runs" / "case1-h200-pairs.json").read_text())
    assert len([m for m in verdicts.round_medians(rec, "broken") if m is not None]) >= 5
    assert "H200" in verdicts.machine_line(rec)


def test_order_repeats_every_outcome():
    same, new = [[1, 2, 3], [1, 2, 3]], [[1, 2, 3], [3, 1, 2]]
    assert verdicts.order_repeats(same, new).holds
    assert verdicts.order_repeats(new, new).fails          # without set_epoch yet reshuffled
    assert verdicts.order_repeats(same, same).fails        # set_epoch that changes nothing


def test_unsteady_filters_by_name():
    rec = _record([1, 1, 1], [1, 1, 1])
    rec["results"]["runs"][0]["step_times"] = [1, 1, 1, 1.5, 0.5, 1.5, 0.5, 1.5, 0.5, 1]
    assert verdicts.unsteady(rec, ("B",)) == []


def _evals(*seconds):
    return [{"outside_work": {"evaluation": s} if s is not None else {}} for s in seconds]


def test_diagnosis_sees_evaluation_on_the_evaluating_rank_only():
    from ddp_lessons.cases.case1 import verdicts as C2
    assert C2.diagnosis_sees_evaluation(_evals(0.9, 0.001)).holds
    # Every rank evaluates (duplicated), or the evaluation landed in a step: not on rank 0 alone.
    assert C2.diagnosis_sees_evaluation(_evals(0.9, 0.8)).fails
    assert C2.diagnosis_sees_evaluation(_evals(None, None)).fails


class _Found:
    def __init__(self, evals, causes):
        self.ranks, self.causes = _evals(*evals), causes


def test_diagnosis_agrees_every_way():
    both = ["exposed_allreduce", "startup", "outside_steps"]
    assert verdicts.diagnosis_agrees(_Found((0.9, 0.001), both)).holds
    assert verdicts.diagnosis_agrees(_Found((0.9, 0.8), both)).fails          # evaluation on every rank
    assert verdicts.diagnosis_agrees(_Found((0.9, 0.001), ["last_bucket_exposed", "outside_steps"])).holds
    miss = verdicts.diagnosis_agrees(_Found((0.9, 0.001), ["startup", "outside_steps"]))
    assert miss.fails and "does not name the exposed all-reduce" in str(miss)


def test_diagnosis_shares_evaluation_both_ways():
    from ddp_lessons.cases.case1 import verdicts as C2
    assert C2.diagnosis_shares_evaluation(_evals(0.4, 0.5)).holds
    assert C2.diagnosis_shares_evaluation(_evals(0.9, 0.01)).fails
    assert C2.diagnosis_shares_evaluation(_evals(0.9, None)).fails


def test_jitter_not_loader_each_way():
    def rec(rel_spread, wait):
        runs = []
        for name in ("nw8", "nw2"):
            for i in range(5):
                st = [0.1] * 3 + [0.1 * (1 + rel_spread * (k % 4) / 3) for k in range(20)]
                runs.append({"name": name, "round": i, "ok": True, "skip": 3, "step_times": st,
                             "parts": {"data": wait * 0.1}})
        return {"results": {"runs": runs, "rounds_done": 5}}
    assert verdicts.jitter_not_loader(rec(0.4, 0.001), ["nw8", "nw2"], "nw2").holds
    assert verdicts.jitter_not_loader(rec(0.01, 0.001), ["nw8", "nw2"], "nw2").fails   # steady: workers did it
    assert verdicts.jitter_not_loader(rec(0.4, 0.5), ["nw8", "nw2"], "nw2").fails      # loader behind


def test_recorded_buckets_are_handed_over_across_the_backward():
    rec = json.loads((ROOT / "data" / "runs" / "case1-h200-broken.json").read_text())
    ready = buckets.recorded_ready(rec)
    assert len(ready) == 44 and sum(b["bytes"] for b in ready) == rec["results"]["per_rank"][0]["grad_bytes"]
    assert ready[0]["ready"] < 0.05 and all(0 <= b["ready"] <= 1 for b in ready)


def test_graph_nodes_counts_the_history_a_sum_keeps():
    w = torch.ones(2, requires_grad=True)
    total = 0
    for _ in range(3):
        total = total + (w * 2).sum()
    assert graph_nodes(total) > graph_nodes((w * 2).sum()) > 0
    assert graph_nodes(total.detach()) == 0 and graph_nodes(1.5) == 0


def test_unused_from_error_reads_ddps_names():
    text = "...\nParameters which did not receive grad for rank 0: mim_head.pred.bias, itm_head.w\nParameter indices"
    assert readout.unused_from_error(text) == ["mim_head.pred.bias", "itm_head.w"]
    assert readout.unused_from_error("no names at OFF") == []


def test_ablation_splits_fix_4a_in_two():
    v = ablation.variants(4)
    heads = v[f"alone: {ablation.HEADS_ONLY}"]
    assert heads.drop_heads and heads.find_unused_parameters
    both = v["alone: 4a find_unused=False (+ heads dropped)"]
    assert both.drop_heads and not both.find_unused_parameters


def test_stays_unsteady_each_way():
    def rec(rel_spread):
        steps = [[0.1] * 3 + [0.1 * (1 + rel_spread * (i % 4) / 3) for i in range(20)] for _ in range(5)]
        runs = [{"name": "x", "round": i, "ok": True, "skip": 3, "step_times": st} for i, st in enumerate(steps)]
        return {"results": {"runs": runs, "rounds_done": 5}}
    assert verdicts.stays_unsteady(rec(0.4), ["x"], "c").holds
    assert verdicts.stays_unsteady(rec(0.01), ["x"], "c").fails
    mixed = rec(0.4)
    mixed["results"]["runs"][1]["step_times"] = [0.1] * 23
    assert verdicts.stays_unsteady(mixed, ["x"], "c").status == U
