"""Where a lesson's ranks run: `place`, `launch(backend=None)`, torchrun's choice,
and workers that refuse a device their process group does not use."""

import pytest

from ddp_lessons import LaunchConfigError, Placement, launch, place
from ddp_lessons.cases import case2
from ddp_lessons.course import replay
from ddp_lessons.tool import records, runtime
from ddp_lessons.cases.case2 import plain
from ddp_lessons.cases.intro import workers as toy
from ddp_lessons.tool.launcher import checks


@pytest.fixture
def gpus(monkeypatch):
    """Pretend this machine shows `n` GPUs: set(n)."""
    def set_count(n):
        monkeypatch.setattr(checks, "visible_gpus", lambda start_method="spawn": n)
    return set_count


@pytest.mark.parametrize("n_gpus, world_size, backend, line", [
    (0, 1, "gloo", "1 rank on gloo/CPU: 0 GPUs visible"),
    (0, 2, "gloo", "2 ranks on gloo/CPU: 0 GPUs visible"),
    (0, 3, "gloo", "3 ranks on gloo/CPU: 0 GPUs visible"),
    (1, 1, "nccl", "1 rank on NCCL, one GPU: 1 GPU visible"),
    (1, 2, "gloo", "2 ranks on gloo/CPU: 1 GPU visible (2 needed for NCCL)"),
    (1, 3, "gloo", "3 ranks on gloo/CPU: 1 GPU visible (3 needed for NCCL)"),
    (2, 2, "nccl", "2 ranks on NCCL, one GPU each: 2 GPUs visible"),
    (2, 3, "gloo", "3 ranks on gloo/CPU: 2 GPUs visible (3 needed for NCCL)"),
    (4, 2, "nccl", "2 ranks on NCCL, one GPU each: 4 GPUs visible"),
    (4, 3, "nccl", "3 ranks on NCCL, one GPU each: 4 GPUs visible"),
    (4, 5, "gloo", "5 ranks on gloo/CPU: 4 GPUs visible (5 needed for NCCL)"),
])
def test_place_chooses_nccl_only_when_every_rank_has_a_gpu(gpus, n_gpus, world_size, backend, line):
    gpus(n_gpus)
    where = place(world_size)
    device, accelerator = ("cuda", "gpu") if backend == "nccl" else ("cpu", "cpu")
    assert where == Placement(world_size, backend, device, n_gpus)
    assert (where.accelerator, where.describe()) == (accelerator, line)


def test_explicit_backend_is_honoured_or_refused_as_launch_refuses(gpus):
    gpus(4)
    assert place(2, "gloo").describe() == "2 ranks on gloo/CPU: 4 GPUs visible (gloo asked for)"
    assert place(3, "nccl").backend == "nccl"
    gpus(1)
    with pytest.raises(LaunchConfigError, match=r"world_size=2 needs 2 GPUs with NCCL \(one per rank\) but 1 visible"):
        place(2, "nccl")
    gpus(0)
    with pytest.raises(LaunchConfigError, match="backend='nccl' needs GPUs and none is visible"):
        place(1, "nccl")
    with pytest.raises(LaunchConfigError, match="backend='mpi' is not supported"):
        place(2, "mpi")
    with pytest.raises(LaunchConfigError, match="world_size must be a whole number"):
        place(0)


def test_place_is_frozen():
    where = place(2)
    with pytest.raises(AttributeError):
        where.backend = "nccl"


def test_launch_without_backend_runs_more_ranks_than_gpus_on_gloo(gpus):
    gpus(1)  # a one-GPU machine: 2 ranks cannot have a GPU each
    out = launch(toy.hello, world_size=2)
    assert [r["backend"] for r in out] == ["gloo", "gloo"]
    assert [r["sum"] for r in out] == [3.0, 3.0]


@pytest.mark.parametrize("local_world_size, n_gpus, backend", [
    (1, 0, "gloo"), (2, 0, "gloo"), (1, 1, "nccl"), (2, 1, "gloo"), (3, 2, "gloo"),
    (2, 2, "nccl"), (3, 4, "nccl"), (8, 8, "nccl"),
])
def test_torchrun_ranks_use_nccl_only_with_a_gpu_each(local_world_size, n_gpus, backend):
    assert runtime.choose_backend(local_world_size, n_gpus) == backend


@pytest.mark.parametrize("backend, asked, result", [
    (None, None, "cpu"), (None, "gpu", "gpu"), (None, "cpu", "cpu"),
    ("gloo", None, "cpu"), ("gloo", "cpu", "cpu"), ("nccl", None, "gpu"), ("nccl", "gpu", "gpu"),
])
def test_accelerator_follows_the_process_group(backend, asked, result):
    assert runtime.accelerator_for(backend, asked) == result


@pytest.mark.parametrize("backend, asked, where", [("nccl", "cpu", "one GPU each"), ("gloo", "gpu", "the CPU")])
def test_accelerator_that_contradicts_the_group_is_refused(backend, asked, where):
    with pytest.raises(ValueError, match=rf"accelerator='{asked}' contradicts the process group's backend "
                                         rf"'{backend}' \(its ranks run on {where}\)"):
        runtime.accelerator_for(backend, asked)
    with pytest.raises(ValueError, match="use 'cpu', 'gpu', or None"):
        runtime.accelerator_for(backend, "cuda")


@pytest.mark.parametrize("worker", [case2.fit_worker, plain.fit])
def test_case2_workers_refuse_a_device_their_group_does_not_use(monkeypatch, worker):
    # As inside a launched rank of a gloo group: asking for the GPU is an error, not a CPU run.
    monkeypatch.setattr(runtime.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(runtime.dist, "get_backend", lambda group=None: "gloo")
    with pytest.raises(ValueError, match="accelerator='gpu' contradicts the process group's backend 'gloo'"):
        worker(case2.Options(epochs=1), "gpu")


def test_a_record_is_made_again_live_only_where_placed_on_nccl(tmp_path):
    rec = records.make_record("case2", {"mode": "nvml"}, {"per_call": 1.0})
    records.save(rec, "case2-somegpu-nvml", runs_dir=tmp_path)
    calls = []

    def rerun(config, where):   # what a case passes: its results, made like the record's config says
        calls.append((config, where.world_size))
        return {"per_call": 2.0}

    cpu = replay.stored_or_live("case2-somegpu-nvml", rerun, Placement(1, "gloo", "cpu", 1), runs_dir=tmp_path)
    assert (cpu["results"], calls, cpu.get("live")) == ({"per_call": 1.0}, [], None)
    assert f"recorded {rec['created'][:10]} at " in records.describe_machine(cpu)
    gpu = replay.stored_or_live("case2-somegpu-nvml", rerun, Placement(1, "nccl", "cuda", 1), runs_dir=tmp_path)
    assert (gpu["results"], calls) == ({"per_call": 2.0}, [({"mode": "nvml"}, 1)])
    assert (gpu["live"], gpu["rerun_of"]) == (True, "case2-somegpu-nvml")
    assert records.describe_machine(gpu).endswith("measured live in this run")
