"""Case 2: the Lightning test rebuilt, its timing callback, the predictor, the CLI."""

import json
import math
import os

import psutil
import pytest
import torch

from ddp_lessons.cases import case2
from ddp_lessons import launch
from ddp_lessons.tool import records
from ddp_lessons.cases.case2.breakeven import Costs, breakeven, predict, speedup
from ddp_lessons.cases.case2.model import grad_bytes, param_count

torch.set_num_threads(1)  # one thread per process, as each launched worker gets on 2 cores
SHORT = dict(epochs=1, train_batches=6, val_batches=2)


def test_posted_model_size_and_gradient_bytes():
    assert param_count() == 134_657 == sum(p.numel() for p in case2.mlp().parameters())
    assert grad_bytes() == 134_657 * 4
    assert param_count(512, 5) == sum(p.numel() for p in case2.mlp(512, 5).parameters())


def test_callback_records_every_micro_step_and_epoch():
    r = case2.fit_here(case2.Options(nvml="off", **SHORT))
    t = r["timer"]
    assert len(t["steps"]) == 6 and len(t["epochs"]) == 1
    assert all(s["step_time"] > 0 and s["forward"] > 0 and s["backward"] > 0 for s in t["steps"])
    assert t["epochs"][0]["validation"] > 0
    assert r["optimizer_steps"] == 2  # 6 micro-steps, accumulate_grad_batches=3


@pytest.mark.slow
def test_three_workers_lightning_reuses_the_launchers_processes():
    out = launch(case2.fit_worker, (case2.Options(nvml="off", **SHORT),), world_size=3, timeout=240)
    assert [r["rank"] for r in out] == [0, 1, 2]
    assert all(r["external"] and r["same_group"] and r["children"] == [] for r in out)
    assert len({r["pid"] for r in out}) == 3 and len({r["ppid"] for r in out}) == 1
    # The launcher's processes: children of this process, or of its fork server.
    assert out[0]["ppid"] in {os.getpid(), *(p.pid for p in psutil.Process().children())}
    # accumulate_grad_batches=3: DDP all-reduces on every 3rd micro-step only (no_sync)
    calls = [s["allreduce_calls"] for s in out[0]["timer"]["steps"]]
    assert calls == [0, 0, 1, 0, 0, 1]
    synced = [s for s in out[0]["timer"]["steps"] if s["allreduce_calls"]]
    assert all(s["allreduce_bytes"] == 134_657 * 4 for s in synced)


def test_fit_worker_untimed_runs_lightnings_own_ddp_strategy():
    out = launch(case2.fit_worker, (case2.Options(nvml="off", **SHORT),), dict(timed=False), world_size=2, timeout=240)
    assert [r["rank"] for r in out] == [0, 1] and all(r["optimizer_steps"] == 2 for r in out)
    assert all(r["external"] and r["same_group"] for r in out)


def test_fit_one_stays_in_this_process_only_where_no_gpu_is_visible():
    from ddp_lessons.tool.launcher.placement import Placement
    opts = case2.Options(nvml="off", **SHORT)
    here = case2.fit_one(opts, Placement(3, "gloo", "cpu", gpus_visible=0))
    assert here["pid"] == os.getpid() and here["optimizer_steps"] == 2
    # one GPU visible, three ranks on gloo/CPU: Lightning would initialise CUDA
    # here (isolate_rng), so the CPU fit runs in one forked process instead
    forked = case2.fit_one(opts, Placement(3, "gloo", "cpu", gpus_visible=1))
    assert forked["pid"] != os.getpid() and forked["ppid"] == os.getpid()
    assert forked["world_size"] == 1 and forked["optimizer_steps"] == 2


FAKE_PYNVML = """
import os
refs = 0
class NVMLError(Exception):
    pass
def _log(word):
    with open(os.environ["FAKE_NVML_LOG"], "a") as f:
        f.write(word + "\\n")
def nvmlInit():
    global refs
    if refs == 0:
        _log("start")  # what costs ~15 ms on a real driver
    refs += 1
def nvmlShutdown():
    global refs
    refs -= 1
    if refs == 0:
        _log("stop")
def nvmlDeviceGetCount():
    return 2
def nvmlDeviceGetHandleByIndex(i):
    return i
class _Rates:
    gpu = 7
def nvmlDeviceGetUtilizationRates(handle):
    return _Rates()
"""


def test_nvml_costs_time_the_block_fresh_in_a_new_process_and_held_here(tmp_path, monkeypatch):
    import importlib
    import sys
    (tmp_path / "pynvml.py").write_text(FAKE_PYNVML)
    log = tmp_path / "nvml.log"
    monkeypatch.setenv("FAKE_NVML_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    importlib.invalidate_caches()
    out = case2.nvml.costs(4)
    assert out["error"] is None and out["process"] == "new"
    assert len(out["calls"]) == 4 and len(out["held"]["calls"]) == 4
    starts = log.read_text().split().count("start")
    # new process: the error probe and each of the 4 calls start NVML (5);
    # here: the probe (1) and the one held reference (1), none of the 4 calls
    assert starts == 5 + 2
    assert case2.nvml.utilisation() == [7, 7]


def test_missing_nvml_raises_the_real_error():
    try:
        import pynvml
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("NVML works on this machine")
    except pynvml.NVMLError as exc:
        expected = f"{type(exc).__name__}: {exc}"
    assert case2.nvml.error() == expected
    assert case2.nvml.cost(3) == {"error": expected, "per_call": None}
    with pytest.raises(pynvml.NVMLError):
        case2.fit_here(case2.Options(**SHORT), timed=False)


def _costs(**kw):
    return Costs(**(dict(c0=1e-3, k=0.0, step_fixed=0.0, latency=1e-3, bandwidth=1e9) | kw))


def test_predictor_arithmetic_by_hand():
    c = _costs()
    one = predict(c, size=5000, batch=256, world_size=1)
    three = predict(c, size=5000, batch=256, world_size=3)
    assert one["steps_per_epoch"] == 20 and three["steps_per_epoch"] == 7  # ceil(1667 / 256)
    assert math.isclose(one["total"], 20 * 1e-3)
    comm = 1e-3 + 134_657 * 4 / 1e9
    assert math.isclose(three["allreduce_per_step"], comm)
    assert math.isclose(three["total"], 7 * (1e-3 + comm))
    acc = predict(c, size=5000, batch=256, world_size=3, accumulate=3)
    assert math.isclose(acc["parts"]["all-reduce"], 3 * comm)  # ceil(7 / 3) synced steps
    assert math.isclose(speedup(c), 20e-3 / (7 * (1e-3 + comm)))  # 20 ms against 7 x 2.54 ms
    slow = _costs(latency=3e-3)  # 7 x 4.54 ms: now one worker wins
    assert speedup(slow) < 1 < speedup(c)


def test_breakeven_finds_the_first_width_that_wins():
    c = _costs(c0=0.0, k=1e-9, startup={3: 1.0})   # latency 1 ms, bandwidth 1 GB/s
    # By hand, size 5000, batch 256, depth 3, so params P = 11w + 2(w + 1)w + w + 1 = 2w^2 + 14w + 1:
    #   1 worker:  ceil(5000 / 256) = 20 steps/epoch, each 1e-9 * 256 * P s of compute
    #   3 workers: ceil(ceil(5000 / 3) / 256) = ceil(1667 / 256) = 7 steps/epoch, each
    #              1e-9 * 256 * P + 1e-3 + 4P / 1e9 s, plus 1 s of startup once
    # 3 win when E * (20 - 7) * 256e-9 * P - E * 7 * 4e-9 * P > 1 + E * 7e-3, i.e.
    #   E * 3.3e-6 * P > 1 + E * 0.007.
    # E = 10: 3.3e-5 * P > 1.07, P > 32424.2:
    #   w = 123: 2 * 15129 + 1722 + 1 = 31981 (loses); w = 124: 2 * 15376 + 1736 + 1 = 32489 (wins).
    assert breakeven(c, "width", range(8, 4097), epochs=10) == 124
    assert breakeven(c, "width", [64, 123, 124, 4096], epochs=10) == 124
    # w = 256 (P = 134657): E * 0.44437 > 1 + E * 0.007, so E > 2.29: the 3rd epoch.
    assert breakeven(c, "epochs", range(1, 20)) == 3
    # w = 8 (P = 241), one epoch: 7.95e-4 s saved against 1.007 s added: never.
    assert breakeven(c, "width", [8], epochs=1) is None


def test_cli_saves_a_loadable_record(tmp_path, capsys):
    from ddp_lessons import cli
    path = tmp_path / "case2-test.json"
    cli.main(["case2", "--mode", "fixed", "--epochs", "1", "--train-batches", "5",
              "--record", str(tmp_path / "case2-test")])  # a path: not data/runs
    assert capsys.readouterr().out.splitlines()[-1] == f"saved {path}"
    raw = json.loads(path.read_text())  # the file itself, not records.load's reading of it
    assert (raw["schema"], raw["schema_version"], raw["kind"]) == ("ddp-lessons/run", 1, "case2")
    assert (raw["config"]["mode"], raw["config"]["accelerator"], raw["config"]["launch"]) == ("fixed", "cpu", False)
    # What the command line asked for, and what `--mode fixed` means (Options.fixed):
    want = dict(epochs=1, train_batches=5, batch_size=256, size=5000, width=256, depth=3, accumulate=1,
                randn_in_getitem=False, fix_loss_shape=True, nvml="off", log_every_step=False, val_every=0)
    assert {k: raw["config"]["options"][k] for k in want} == want
    assert raw["machine"]["torch"] == torch.__version__
    assert raw["machine"]["cpu_affinity"] == len(os.sched_getaffinity(0))
    assert len(raw["machine"]["gpus"]) == torch.cuda.device_count() and raw["machine"]["backend"] is None
    assert set(raw["results"]) == {"lightning", "plain"}
    (lightning,) = raw["results"]["lightning"]
    assert lightning["optimizer_steps"] == 5 and len(lightning["timer"]["steps"]) == 5
    (plain,) = raw["results"]["plain"]
    assert plain["world_size"] == 1 and plain["optimizer_steps"] == len(plain["timer"]["steps"]) > 0
    assert records.load(path) == raw


# -- notebook 04: the loss-shape bug, Lightning's launchers, the launch of the posted script ---------
def test_the_posted_loss_warns_and_broadcasts_and_the_fixed_one_does_not():
    import warnings
    pred, y = case2.mlp()(torch.randn(8, 1, case2.D_IN)), torch.randn(8, 1)
    assert (pred - y).shape == (8, 8, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        case2.loss_fn(pred, y, case2.Options())
        case2.loss_fn(pred, y, case2.Options(fix_loss_shape=True))
    assert len(caught) == 1 and "Using a target size (torch.Size([8, 1]))" in str(caught[0].message)


def test_the_posted_loss_learns_the_batch_mean_and_the_fixed_one_learns_the_target():
    posted, fixed = case2.loss_shape_effect(False, steps=150), case2.loss_shape_effect(True, steps=150)
    assert posted["pred_std"] < 0.05 * posted["target_std"]       # every prediction near the batch's mean
    assert fixed["corr"] > 0.95 and fixed["pred_std"] > 0.5 * fixed["target_std"]


def test_launcher_of_each_strategy():
    assert case2.launcher_of("ddp").startswith("_SubprocessScriptLauncher")
    assert case2.launcher_of("ddp_spawn") == "_MultiProcessingLauncher (spawn)"
    assert case2.launcher_of("ddp_notebook") == "_MultiProcessingLauncher (fork)"


def test_the_logger_flushes_at_lightnings_default_not_every_step():
    opts = case2.Options(nvml="off", epochs=1, train_batches=20, val_every=0, accumulate=1)
    default = case2.fit_here(opts, timed=False)
    every = case2.fit_here(opts, timed=False, flush_every=1)
    assert default["log_rows"] == 0 and every["log_rows"] == 20    # 20 optimizer steps: the 50th never came


@pytest.mark.slow
def test_the_posted_script_under_strategy_ddp_reruns_itself_for_ranks_1_and_2():
    run = case2.run_script(3)
    assert [r["rank"] for r in run["ranks"]] == [0, 1, 2]
    assert run["ranks"][0]["launcher"] == "_SubprocessScriptLauncher"
    assert [r["local_rank_env"] for r in run["ranks"]] == ["0", "1", "2"]   # Lightning sets it in rank 0 too
    assert all(r["child_of_rank0"] and r["same_command"] for r in case2.other_ranks(run))
    assert all(p >= 0 for p in case2.parts(run).values()) and 0 < case2.launch_s(run) < run["wall"]
