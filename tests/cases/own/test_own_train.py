"""Notebook 07's workload (ddp_lessons.cases.own): options, data, model, the plain script the doctor reads,
the command line, the recorded GPU run read back, and the facts 07 prints as readings (the sample order, the
counts, the debug levels, no_sync's gradients)."""

import ast
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data.distributed import DistributedSampler

from ddp_lessons import Record, Run, diagnose, launch
from ddp_lessons.cases.own import accumulate, cli, gpu, readout, standalone, unused
from ddp_lessons.cases.own.data import SyntheticCIFAR
from ddp_lessons.cases.own.model import SmallResNet
from ddp_lessons.cases.own.options import Options


def test_options_refuse_nonsense_and_the_fix_is_five_switches():
    with pytest.raises(ValueError, match="evaluation='rank0'"):
        Options(evaluation="rank0")
    assert set(Options.fixed().diff(Options.broken())) == {"evaluation", "set_epoch", "step_log", "num_workers",
                                                          "persistent_workers"}
    # the first fix alone: what 07 measures before the others
    assert Options.preset("eval_sharded").diff(Options.broken()) == {"evaluation": ("distributed", "every_rank")}


def test_data_is_cifar_shaped_and_deterministic():
    a, b = SyntheticCIFAR(8, seed=1, augment=False), SyntheticCIFAR(8, seed=1, augment=False)
    x, y = a[3]
    assert x.shape == (3, 32, 32) and x.dtype == torch.float32 and 0 <= y < 10
    assert torch.equal(x, b[3][0])
    assert SyntheticCIFAR(8, augment=True)[0][0].shape == (3, 32, 32)


def test_without_set_epoch_every_epoch_draws_the_same_order():
    # the reading 07 prints: the sampler's order moves only when it is told the epoch
    sampler = DistributedSampler(range(64), num_replicas=2, rank=0, seed=0)
    first, again = list(sampler)[:8], list(sampler)[:8]
    sampler.set_epoch(1)
    assert first == again and list(sampler)[:8] != first


def test_the_unused_branch_is_found_by_running_the_model():
    assert unused.unused_names(SmallResNet(width=4, with_unused_branch=True)) == ["aux_head.weight", "aux_head.bias"]
    assert unused.unused_names(SmallResNet(width=4)) == []


def test_the_standalone_script_never_imports_the_package_and_is_copied_under_its_own_name(tmp_path):
    tree = ast.parse(Path(standalone.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m.startswith("ddp_lessons") or m.startswith(".") for m in imported if m)
    path = standalone.copy_to(tmp_path)
    assert isinstance(path, str) and Path(path) == tmp_path / "train.py"


@pytest.mark.parametrize("gpus, ranks, want", [(0, 2, ("gloo", "cpu")), (1, 2, ("gloo", "cpu")),
                                               (2, 2, ("nccl", "cuda:1")), (1, 1, ("nccl", "cuda:1"))])
def test_the_standalone_script_takes_a_gpu_per_rank_or_else_cpus(monkeypatch, gpus, ranks, want):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(ranks))
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert standalone.placement() == want


def test_the_standalone_script_trains_and_evaluates_as_one_process(tmp_path, capfd):
    standalone.main(epochs=2, train_size=32, test_size=64, batch=16)
    out = capfd.readouterr().out.splitlines()
    assert [ln.split(" loss")[0] for ln in out if "loss" in ln] == [f"epoch {e} step {s}" for e in (0, 1)
                                                                     for s in (0, 1)]
    assert sum("accuracy" in ln for ln in out) == 2


@pytest.mark.slow
def test_the_doctor_ranks_the_scripts_evaluation_first_with_no_line_changed(tmp_path):
    from ddp_lessons.tool.doctor import doctor
    script = standalone.copy_to(tmp_path)
    up = doctor([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", script],
                steps=10, warmup=2, capture=True, runs_dir=tmp_path)
    assert up.returncode == 0 and len(up.run) == 2
    assert readout.first_finding(up.diagnosis) == "outside_steps: evaluation"
    assert sum(ln.startswith("epoch") for ln in up.stdout.splitlines()) == 13   # 11 steps and 2 evaluations


def test_the_command_line_turns_its_arguments_into_options():
    import argparse
    p = argparse.ArgumentParser()
    cli.cli_command(p)
    args = p.parse_args(["--preset", "fixed", "--epochs", "3", "--set", "evaluation=none", "--width", "8"])
    o = cli.options_from(args)
    assert (o.evaluation, o.epochs, o.width, o.set_epoch) == ("none", 3, 8, True)
    with pytest.raises(SystemExit):
        p.parse_args(["--set", "evaluation=rank0"])


@pytest.mark.slow
def test_the_command_runs_the_workload_on_two_ranks_and_prints_its_diagnosis(tmp_path):
    import subprocess
    from ddp_lessons.cases.own import CASE
    assert CASE.commands == {"own": "ddp_lessons.cases.own.cli:cli_command"}
    out = subprocess.run([sys.executable, "-m", "ddp_lessons", "own", "--preset", "fixed", "--nproc", "2", "--epochs",
                          "1", "--train-size", "64", "--test-size", "64", "--width", "8", "--trace",
                          str(tmp_path / "trace")], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "diagnosis of 2 of 2 rank(s)" in out.stdout and "work outside the steps: eval" in out.stdout
    assert sorted(p.name for p in (tmp_path / "trace").iterdir()) == ["rank-0.json.gz", "rank-1.json.gz"]


def test_the_recorded_gpu_run_says_where_it_was_made_and_what_it_shows():
    rec = Record.load(gpu.RUN)
    line = gpu.provenance(rec)
    assert line.startswith("1x NVIDIA H200; torch 2.11.0+cu130, NCCL 2.28.9") and "at commit 2de9dd4" in line
    assert "(made from 2de9dd4 with uncommitted" in line
    assert gpu.topology(rec).splitlines()[1].split()[:3] == ["GPU0", "X", "0-15"] and "Legend" not in gpu.topology(rec)
    lines = gpu.results(rec, "nccl_debug")["lines"]
    assert lines and not gpu.sort_nccl(lines)["transport to a peer"] and not any(" via " in ln for ln in lines)
    busy, traced = readout.busy_share(Run.load(gpu.RUN, setup="broken"))
    assert traced == 3 and 0.03 < busy < 0.1                      # host-bound: what 07's answer says (6%)
    assert readout.busy_share(Run.load(gpu.RUN, setup="fixed")) is None   # the trace is the broken setup's


def test_diagnose_on_the_recorded_gpu_run_names_host_bound_steps_first_and_no_communication():
    found = diagnose(Run.load(gpu.RUN, setup="broken"))
    assert found.causes[0] == "host_bound_steps"
    assert not {"exposed_allreduce", "waiting_for_slower_rank", "rank_to_rank_jitter"} & set(found.causes)


def test_the_first_step_waits_for_the_fixed_setups_workers_to_start():
    rec = Record.load(gpu.RUN)
    first, median = readout.first_and_median_stall(readout.with_passes(rec.run("fixed", 1))[0])
    assert first > 50 * median                                    # 364 ms against 1.6 ms recorded


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


@pytest.mark.slow
def test_info_names_the_unused_parameters_and_the_default_level_gives_indices():
    errors = launch(unused.unused_parameter_errors, world_size=2, threads=1, backend="gloo")[0]
    names = ["aux_head.weight", "aux_head.bias"]
    assert all(n in errors["INFO"] for n in names) and all(n in errors["DETAIL"] for n in names)
    assert not any(n in (errors["OFF"] or "") for n in names) and "indices" in errors["OFF"]


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
