"""Case 1's claims (ddp_lessons.cases.case1.claims): each holds on numbers like a run's and fails on a
plausible counter-example; and the readings that replaced the other verdicts, on made-up numbers."""

import json
import re
from pathlib import Path

import pytest
import torch

from ddp_lessons.tool import verdict as V
from ddp_lessons.cases.case1 import CLAIMS, ablation, buckets, plan, readout, scaling
from ddp_lessons.cases.case1.evaluate import ShardSampler
from ddp_lessons.cases.case1.loop import graph_nodes

ROOT = Path(__file__).resolve().parents[3]


# -- 01: rank 1 waits out rank 0's evaluation ------------------------------------------------
def _edge(e0, ar0, ar1, d0=0.1, d1=0.1, usual=(0.05, 0.06, 0.07, 0.08)):
    return [{"rank": 0, "eval_time": e0, "first_allreduce": ar0, "first_data": d0, "usual_allreduce": list(usual)},
            {"rank": 1, "eval_time": 0.0, "first_allreduce": ar1, "first_data": d1, "usual_allreduce": list(usual)}]


def _waits(rows):
    return CLAIMS.decide("rank1_waits_out_evaluation", *readout.evaluation_wait(rows))


def test_rank1_waits_out_evaluation_holds_when_rank1_sat_it_out():
    v = _waits(_edge(1.0, 0.05, 1.0))             # the stored run's shape: 0.84 s evaluation, 0.70 s blocked
    assert v.holds and str(v).startswith("verdict: In this run rank 1 sat in its first all-reduce")


def test_rank1_waits_out_evaluation_fails_when_the_evaluation_is_shared():
    assert _waits(_edge(1.0, 0.05, 0.06)).fails   # both ranks evaluated: the first all-reduce is ordinary


def test_rank1_waits_out_evaluation_fails_when_the_loader_restart_explains_the_wait():
    assert _waits(_edge(1.0, 0.05, 1.0, d0=0.9, d1=0.0)).fails   # rank 0's slow restart, not its evaluation


def test_rank1_waits_out_evaluation_is_unresolved_when_half_of_it_is_inside_the_margin():
    assert _waits(_edge(1.0, 0.05, 0.55)).status == V.UNRESOLVED


def test_evaluation_wait_needs_the_evaluating_rank():
    with pytest.raises(ValueError, match="did not evaluate"):
        readout.evaluation_wait(_edge(0.0, 0.05, 1.0))


# -- 02: the batch halved against the batch kept -----------------------------------------------
KEPT = [4.0, 4.2, 4.1, 4.3, 4.15, 4.05, 4.25]


def _halved(*halved):
    return CLAIMS.decide("halved_epoch_longer", KEPT[:len(halved)], list(halved))


def test_halved_epoch_longer_holds_when_a_step_does_not_halve():
    assert _halved(6.6, 6.9, 6.8, 7.1, 6.7, 6.75, 7.0).holds       # the stored run: about 1.65x


def test_halved_epoch_longer_fails_when_a_step_halves_with_the_batch():
    # compute dominates and scales with the batch: twice the steps of half the cost, less the fixed part
    assert _halved(3.6, 3.7, 3.75, 3.8, 3.65, 3.7, 3.72).fails


def test_halved_epoch_longer_is_unresolved_when_the_rounds_overlap_or_are_too_few():
    assert _halved(4.5, 3.8, 4.6, 3.9, 4.4, 3.7, 4.3).status == V.UNRESOLVED
    assert _halved(6.6, 6.9, 6.8, 7.1, 6.7, 6.75).status == V.UNRESOLVED   # 6 rounds: 7 needed


def test_claim_sentences_carry_no_figures_and_come_in_notebook_order():
    for c in CLAIMS.values():
        for sentence in (c.holds, c.fails, c.unresolved):
            # nbval compares them: no figure that varies (a rank's number is a name)
            assert sentence and not re.search(r"\d", re.sub(r"rank \d", "", sentence)), (c.key, sentence)
    decided = [k for nb in sorted((ROOT / "notebooks" / "src").glob("0[123]_*.py"))
               for k in re.findall(r'CLAIMS\.decide\("(\w+)"', nb.read_text())]
    assert decided == list(CLAIMS)


# -- readings that replaced verdicts -------------------------------------------------------------
def test_split_counts_shared_and_distinct_questions():
    res = [{"epochs": [{"qids": [1, 2]}]}, {"epochs": [{"qids": [3, 4]}]}]
    assert readout.split(res) == {"per_rank": [2, 2], "shared": 0, "distinct": 4}
    res[1]["epochs"][0]["qids"] = [1, 2]    # every rank the same job: what the post feared
    assert readout.split(res) == {"per_rank": [2, 2], "shared": 2, "distinct": 2}


def test_the_posted_sampler_repeats_the_shards_on_every_node():
    assert plan.shards_on_nodes(348, 1, 2) == {"ranks": 2, "distinct": 348, "reads_per_sample": 1.0}
    assert plan.shards_on_nodes(348, 2, 2) == {"ranks": 4, "distinct": 174, "reads_per_sample": 2.0}
    assert plan.shards_on_nodes(348, 2, 2, posted=False)["distinct"] == 348


def test_epoch_boundary_reads_the_first_step_of_epoch_1():
    steps = [{"step_time": 1, "data": 0.01, "allreduce": a} for a in (9, 9, 0.1, 0.2, 5.0, 0.3, 0.4)]
    res = [{"rank": 0, "steps_per_epoch": 4, "timer": {"steps": steps},
            "epochs": [{"eval_time": 2.0}, {"eval_time": 1.0}]}]
    (row,) = readout.epoch_boundary(res)
    assert row["first_allreduce"] == 5.0 and row["eval_time"] == 2.0
    assert row["usual_allreduce"] == [0.1, 0.2, 0.3, 0.4]


def test_core_share_says_whether_a_rank_double_books_its_cores():
    # a count against the share, not a load: workers sleep once their batches are queued
    assert readout.core_share(8, 1, 2, 2).endswith("may double-book them when the workers are busy")
    assert readout.core_share(15, 1, 16, 1).endswith("fits them")      # the budget: exactly the share


def test_scaling_reading_gives_the_step_ratio_and_the_epoch():
    text = scaling.describe({"1 worker": [10, 10], "2 workers": [15, 20], "batch": (8, 8)})
    assert "1.50 .. 2.00 x one on 1 worker" in text and "50% .. 67%" in text and "0.75 .. 1.00 x" in text


def test_batch_rounds_interleave_and_give_each_round_its_epoch():
    kept, halved = object(), object()
    names = list(scaling.batch_variants(kept, halved, 3))
    assert names == ["0 kept", "0 halved", "1 halved", "1 kept", "2 halved", "2 kept"]
    run = lambda t: [{"timer": {"steps": [{"step_time": t}] * 4}}]  # noqa: E731
    runs = {n: run(0.1 if n.endswith("kept") else 0.08) for n in names}
    k, h = scaling.epoch_by_round(runs, {"kept": 22, "halved": 44})
    assert k == pytest.approx([2.2] * 3) and h == pytest.approx([3.52] * 3)


def test_padded_sampler_really_counts_differently():
    from torch.utils.data.distributed import DistributedSampler
    idx = [i for r in range(2) for i in DistributedSampler(range(51), num_replicas=2, rank=r, shuffle=False)]
    shard = [i for r in range(2) for i in ShardSampler(51, r, 2)]
    assert sorted(shard) == list(range(51)) and len(idx) == 52


# -- the recorded GPU rounds, read -------------------------------------------------------------
def _record(a_times, b_times, commit=None, torch_version="2.11.0+cu130"):
    runs = []
    for i, (x, y) in enumerate(zip(a_times, b_times, strict=True)):
        for name, t in (("A", x), ("B", y)):
            steps = [t * (1 + 0.01 * (k % 3)) for k in range(10)]
            runs.append({"name": name, "round": i, "ok": True, "skip": 2, "step_times": steps,
                         "parts": {"data": 0.01 * t}})
    return {"results": {"rounds_done": len(a_times), "runs": runs}, "commit": commit,
            "machine": {"gpus": ["G"], "cpu_count": 4, "torch": torch_version, "nccl": "n", "driver": "d",
                        "python": "3.12"},
            "config": {"world_size": 1}, "created": "2026-01-01T00:00"}


def test_paired_reading_gives_the_sign_tests_chance_level():
    five = readout.paired(_record([1] * 5, [0.8, 0.9, 0.85, 0.82, 0.88]), "A", "B")
    assert "0.80 .. 0.90 over 5 rounds, all below 1: a sign test puts 6.2% on that by chance" in five
    seven = readout.paired(_record([1] * 7, [1.2] * 7), "A", "B")
    assert "all above 1" in seven and "1.6%" in seven
    assert "no difference resolved" in readout.paired(_record([1] * 5, [0.8, 1.2, 0.9, 0.85, 0.95]), "A", "B")


def test_record_line_names_its_provenance():
    line = readout.record_line(_record([1], [1]))
    assert "torch 2.11.0+cu130, NCCL n" in line and "no recorded commit" in line and "read here with torch" in line
    assert "uncommitted tree" in readout.record_line(_record([1], [1], commit="7eefa71+wip"))
    assert "commit aaaaaaa" in readout.record_line(_record([1], [1], commit="a" * 40))


def test_unsteady_iqr_and_data_wait_read_each_run():
    rec = _record([1] * 5, [1] * 5)
    assert readout.unsteady(rec) == []
    rec["results"]["runs"][0]["step_times"] = [1, 1, 1, 1.5, 0.5, 1.5, 0.5, 1.5, 0.5, 1]
    assert [(n, r) for n, r, _ in readout.unsteady(rec)] == [("A", 0)] and readout.unsteady(rec, ("B",)) == []
    assert readout.iqr_rels(rec, "A")[0] > 0.05 and max(readout.data_wait_share(rec, "B")) < 0.011
    with pytest.raises(KeyError, match="use one of"):
        readout.round_medians(rec, "C")


def test_the_stored_records_read():
    pairs = json.loads((ROOT / "data" / "runs" / "case1-h200-pairs.json").read_text())
    assert len(readout.ratios(pairs, "broken", "fixed")) >= 5
    assert "H200" in readout.record_line(pairs)
    jitter = json.loads((ROOT / "data" / "runs" / "case1-h200-bf16-jitter.json").read_text())
    assert "uncommitted tree" in readout.record_line(jitter)


# -- buckets, the loss sum, the answer's fixes ---------------------------------------------------
def test_assign_closes_a_bucket_at_the_cap():
    order = [("a", 600_000), ("b", 600_000), ("c", 100), ("emb", 13_000_000)]
    assert [len(b) for b in buckets.assign(order, 1)] == [2, 2]
    assert [len(b) for b in buckets.assign(order, 25)] == [4]
    late = [("a", 1_000_000), ("b", 1_000_000), ("emb", 13_000_000)]
    assert buckets.last_bucket_share(late, 1) == pytest.approx(13 / 15)
    assert buckets.last_bucket_share(list(reversed(late)), 1) == pytest.approx(2 / 15)   # b and a together


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


def test_only_dropping_the_heads_changes_the_bytes():
    rows = [{"variant": "posted", "allreduce_bytes": 10}, {"variant": "alone: 1", "allreduce_bytes": 10},
            {"variant": "alone: 4a heads", "allreduce_bytes": 6}, {"variant": "up to: 4b", "allreduce_bytes": 6}]
    assert ablation.bytes_changed(rows) == ["alone: 4a heads", "up to: 4b"]


def test_evaluated_counts_each_ranks_questions():
    res = [{"epochs": [{"eval": {"n": 52}}]}, {"epochs": [{"eval": None}]}]
    assert readout.evaluated(res) == [52, None]


def test_a_recorded_gpu_run_is_the_record_where_no_gpu_runs_it():
    from ddp_lessons import place
    from ddp_lessons.cases import case1
    rec = case1.recorded("case1-h200-broken", place(1))
    assert rec["kind"] == "case1" and not rec.get("live")
