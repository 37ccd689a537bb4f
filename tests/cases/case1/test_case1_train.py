"""Case 1: the posted loop and its fixes change exactly what they claim."""

import json
import math

import pytest

from ddp_lessons import WorkerFailed, cli, launch
from ddp_lessons.tool import records
from ddp_lessons.cases import case1
from ddp_lessons.cases.case1 import evaluate_worker, parse_override, per_rank, run_without_launcher
from ddp_lessons.cases.case1.data import make_vqa_dataset
from ddp_lessons.cases.case1.model import M3AEConfig, M3AETransformerSS, drop_unused_heads
from ddp_lessons.tool.ddp import gradient_bytes

FAST = dict(num_workers=0, batch_size=8)   # loader workers only where a test needs them


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    # 85 questions: 74 train (37 per rank), 11 test (odd: a padding sampler would repeat one)
    r = tmp_path_factory.mktemp("case1") / "vqa"
    make_vqa_dataset(r, n_images=16, n_qa=85, image_size=64)
    return str(r)


@pytest.fixture(scope="module")
def train_qids(root):
    with open(f"{root}/train.json") as f:
        return sorted(e["qid"] for e in json.load(f))


# The tests that read `posted` or `fixed` are marked slow: the two runs take ~30 s on 2 cores.
@pytest.fixture(scope="module")
def posted(root):
    return launch(case1.train, (case1.Options.broken(**FAST), root, 2), world_size=2)


@pytest.fixture(scope="module")
def fixed(root):
    # One loader worker per rank ("cores" on 2 cores, 2 ranks), halved batch, no set_epoch.
    o = case1.Options.fixed(batch_size=8, batch="halved", set_epoch=False)
    return launch(case1.train, (o, root, 2), world_size=2)


@pytest.mark.slow
def test_posted_sampler_splits_the_data_under_a_launcher(posted, train_qids):
    for e in range(2):
        a, b = (set(r["epochs"][e]["qids"]) for r in posted)
        assert not a & b and sorted(a | b) == train_qids
    assert [row["samples"] for row in per_rank(posted)] == [74, 74]   # 37 per epoch each


@pytest.mark.slow
def test_set_epoch_reshuffles_and_omitting_it_repeats_the_order(posted, fixed):
    assert posted[0]["epochs"][0]["qids"] != posted[0]["epochs"][1]["qids"]
    assert fixed[0]["epochs"][0]["qids"] == fixed[0]["epochs"][1]["qids"]


@pytest.mark.slow
def test_steps_and_schedule_follow_the_batch_choice(posted, fixed):
    r = posted[0]
    assert r["steps_per_epoch"] == math.ceil(37 / 8) and r["batch_size"] == 8
    assert r["schedule_steps"] == math.ceil(74 / 8) * 2      # sized from len(entries)
    assert len(r["lrs"]) == 2 * r["steps_per_epoch"] < r["schedule_steps"]
    assert min(r["lrs"]) > 0                                  # never decays to its end
    f = fixed[0]
    assert f["batch_size"] == 4 and f["steps_per_epoch"] == math.ceil(37 / 4)
    assert f["schedule_steps"] == len(f["lrs"]) == 2 * f["steps_per_epoch"]
    assert f["lrs"][-1] == pytest.approx(f["lr_peak"] / (f["schedule_steps"] - 2))


@pytest.mark.slow
def test_allreduce_bytes_are_the_gradient_bytes(posted, fixed, root):
    heads = gradient_bytes(M3AETransformerSS(M3AEConfig.tiny()))
    no_heads = gradient_bytes(drop_unused_heads(M3AETransformerSS(M3AEConfig.tiny())))
    for results, want in ((posted, heads), (fixed, no_heads)):
        for row in per_rank(results):
            assert row["allreduce_bytes"] == [want] == [row["grad_bytes"]]
            assert len(row["allreduce_calls"]) == 1 and row["allreduce_calls"][0] >= 1


@pytest.mark.slow
def test_posted_evaluation_runs_on_rank_0_only(posted, fixed):
    assert posted[0]["epochs"][0]["eval"]["n"] == 11 and posted[1]["epochs"][0]["eval"] is None
    assert fixed[0]["epochs"][1]["eval"] == fixed[1]["epochs"][1]["eval"]
    assert fixed[0]["epochs"][1]["eval"]["n"] == 11


def test_distributed_evaluation_equals_single_process(root):
    # a model that gets some answers right, so equal counts mean something
    o = case1.Options.fixed(**FAST)
    single = evaluate_worker(o, root, distributed=False, fixture=True)
    shards = launch(evaluate_worker, (o, root, True), dict(fixture=True), world_size=2)
    assert single["n"] == 11 and 0 < single["counts"][1] + single["counts"][3] < 11
    assert shards[0] == shards[1] == single
    # the counter-example: DistributedSampler pads 11 questions to 2 x 6, one counted twice
    padded = launch(evaluate_worker, (o, root, True), dict(fixture=True, sampler="padded"), world_size=2)
    assert padded[0]["n"] == 12 and padded[0]["counts"] != single["counts"]


def test_evaluate_worker_refuses_an_unknown_sampler(root):
    with pytest.raises(ValueError, match="use one of"):
        evaluate_worker(case1.Options.fixed(**FAST), root, distributed=False, sampler="pad")


def test_find_unused_false_with_heads_fails_with_ddps_message(root):
    o = case1.Options.broken(find_unused_parameters=False, steps_limit=3, evaluation="none", **FAST)
    with pytest.raises(WorkerFailed) as err:
        launch(case1.train, (o, root, 1), world_size=2)
    assert "Expected to have finished reduction in the prior iteration" in err.value.summary


@pytest.mark.slow
def test_static_graph_runs_with_the_heads_still_there(root):
    o = case1.Options.broken(find_unused_parameters=False, static_graph=True, steps_limit=3,
                            evaluation="none", **FAST)
    out = launch(case1.train, (o, root, 1), world_size=2)
    assert [r["epochs"][0]["steps"] for r in out] == [3, 3]


def test_without_a_launcher_the_post_fails_with_the_real_errors():
    first, second = run_without_launcher()
    assert first["error"] == "UnboundLocalError" and "device" in first["message"]
    assert second["error"] == "ValueError" and "init_process_group" in second["message"]


def test_overrides_are_typed():
    assert parse_override("find_unused_parameters=false") == ("find_unused_parameters", False)
    assert parse_override("bucket_cap_mb=1.5") == ("bucket_cap_mb", 1.5)
    assert parse_override("num_workers=cores") == ("num_workers", "cores")
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_override("no_such_option=1")


@pytest.mark.slow
def test_cli_saves_a_loadable_record(root, tmp_path, capsys):
    path = tmp_path / "case1-cli.json"
    cli.main(["case1", "--nproc", "1", "--preset", "fixed", "--steps-limit", "2", "--data-root", root,
              "--set", "num_workers=0", "--set", "evaluation=none", "--record", str(path)])
    rec = records.load(path)
    assert rec["kind"] == "case1" and rec["config"]["options"]["drop_heads"] is True
    assert rec["results"]["ranks"][0]["epochs"][0]["steps"] == 2
    assert "saved" in capsys.readouterr().out


@pytest.mark.slow
def test_each_run_of_train_many_counts_only_its_own_start_up(root):
    # Two runs in one process: the second's start-up is its own set-up, not the first run.
    o = case1.Options.fixed(steps_limit=3, evaluation="none", **FAST)
    first, second = launch(case1.train_many, ([o, o], root, 1), world_size=1)[0]
    a1, a2 = first["timer"]["account"], second["timer"]["account"]
    # from the process's start it would hold all of the first run, and more
    assert a2["startup"] < a1["startup"] + a1["wall"]
