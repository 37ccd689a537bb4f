"""The doctor on scripts that never import the package: the diagnosis names what was planted, the
script's own output and exit status pass through, nothing is left behind; bad commands get one line;
the knobs and their verdicts. (`tests/support/scripts/plain_ddp.py`: rank 0 evaluates alone, accumulation
without no_sync.)"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ddp_lessons.tool import spread
from ddp_lessons.tool.diagnosis.causes import ACCUMULATION, DATA, OUTSIDE, SMALL_BUCKETS
from ddp_lessons.tool.doctor import command, confirm

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "support" / "scripts" / "plain_ddp.py"
BIN = Path(sys.executable).parent
TORCHRUN = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", "2"]


def _run(args, cwd, **kw):
    env = {**os.environ, "DDP_LESSONS_RUNS": str(cwd / "runs")}
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300, env=env, **kw)


def _ours_in_tmp() -> set:
    import tempfile
    return {p.name for p in Path(tempfile.gettempdir()).glob("ddp_lessons-*")}


@pytest.mark.slow
def test_a_script_that_never_imports_the_package_is_diagnosed_and_its_output_passes_through(tmp_path):
    before = _ours_in_tmp()
    plain = _run([*TORCHRUN, str(SCRIPT), "--say-group-freed"], tmp_path)
    doc = _run([sys.executable, "-m", "ddp_lessons", "doctor", "--steps", "20", "--", *TORCHRUN, str(SCRIPT),
                "--say-group-freed"], tmp_path)
    assert plain.returncode == doc.returncode == 0, plain.stderr[-3000:] + doc.stderr[-3000:]
    # the doctor lets go of the model at destroy_process_group, so the group is freed there as it is
    # without the doctor, and no gloo thread runs on into the interpreter's exit
    for r in (0, 1):
        freed = f"rank {r}: group freed by destroy_process_group: True"
        assert plain.stderr.count(freed) == doc.stderr.count(freed) == 1, plain.stderr[-2000:] + doc.stderr[-2000:]
    assert doc.stdout == plain.stdout and "eval" in plain.stdout          # the script's output, unchanged
    err = doc.stderr
    assert "2 rank(s) timed" in err and "1. work outside the steps: evaluation" in err, err[-4000:]
    assert "gradient accumulation without no_sync" in err and "4 all-reduces per optimizer step" in err
    assert "fixes that need your code:" in err and "the doctor's own hooks:" in err
    # nothing left behind but the record, which diagnose reads
    assert [p.name for p in tmp_path.iterdir()] == ["runs"] and _ours_in_tmp() <= before
    (rec,) = (tmp_path / "runs").glob("doctor-plain_ddp-*.json")
    again = _run([sys.executable, "-m", "ddp_lessons", "diagnose", str(rec)], tmp_path)
    assert again.returncode == 0 and OUTSIDE.replace("_", " ") not in again.stderr
    assert "evaluation (forwards without gradients)" in again.stdout


@pytest.mark.slow
def test_the_exit_status_and_a_single_process_pass_through(tmp_path):
    doc = _run([sys.executable, "-m", "ddp_lessons", "doctor", "--", sys.executable, str(SCRIPT), "--exit-code", "3",
                "--steps", "6"], tmp_path)
    assert doc.returncode == 3, doc.stderr[-2000:]
    assert "1 rank(s) timed" in doc.stderr and "world size 1" in doc.stderr   # a plain model, no DDP
    assert "the failure came at exit, after the training" in doc.stderr       # exit 3 came after its last step


def test_a_script_that_raises_while_training_is_not_said_to_have_failed_at_exit(tmp_path):
    script = tmp_path / "raises.py"
    script.write_text("import torch\nm = torch.nn.Linear(8, 8)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                      "for i in range(8):\n    m(torch.randn(4, 8)).sum().backward()\n    opt.step()\n"
                      "    opt.zero_grad()\n    if i == 6:\n        raise RuntimeError('boom')\n")
    doc = _run([sys.executable, "-m", "ddp_lessons", "doctor", "--", sys.executable, str(script)], tmp_path)
    assert doc.returncode == 1 and "RuntimeError: boom" in doc.stderr and "1 rank(s) timed" in doc.stderr
    assert "failure came at exit" not in doc.stderr
    (rec,) = (tmp_path / "runs").glob("doctor-raises-*.json")
    assert '"reason": "the script raised RuntimeError"' in rec.read_text()


@pytest.mark.slow
def test_steps_end_a_long_run_cleanly_and_an_interrupt_keeps_what_was_measured(tmp_path):
    doc = _run([sys.executable, "-m", "ddp_lessons", "doctor", "--steps", "4", "--warmup", "2", "--",
                *TORCHRUN, str(SCRIPT), "--steps", "500"], tmp_path)
    # stopped inside the 6th opt.step(): the script prints each step after it, so step 5 is its last line
    assert doc.returncode == 0 and "step 5 loss" in doc.stdout and "step 6 loss" not in doc.stdout
    assert "stopped the command after 2 + 4 optimizer steps" in doc.stderr
    # unbuffered, so that the script's step lines arrive as it prints them
    env = {**os.environ, "DDP_LESSONS_RUNS": str(tmp_path / "runs"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "ddp_lessons", "doctor", "--", *TORCHRUN, str(SCRIPT),
                             "--steps", "5000"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    for line in proc.stdout:              # the ranks are training once the script has stepped 3 times
        if line.startswith("step 3 loss"):
            break
    assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGINT)    # as a terminal's Ctrl-C reaches the whole group
    _, err = proc.communicate(timeout=120)
    assert "(interrupted)" in err and "2 rank(s) timed" in err, err[-3000:]


@pytest.mark.parametrize("cmd,says", [([], "give the command you run today"),
                                       (["no-such-tool-xyz"], "no such command"),
                                       (["ls"], "not a Python program"),
                                       (["missing.py"], "no such file")])
def test_bad_commands_get_one_line(cmd, says):
    with pytest.raises(command.DoctorError, match=says) as info:
        command.resolve(cmd)
    assert "\n" not in str(info.value)


def test_a_command_that_exits_at_once_says_so(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ddp_lessons", "doctor", "--", sys.executable, "-c",
                          "raise SystemExit(5)"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 5 and "no rank was timed" in out.stderr and not (tmp_path / "runs").exists()


def test_knobs_are_parsed_and_named():
    assert confirm.parse("ddp.bucket_cap_mb=50").knobs == {"ddp": {"bucket_cap_mb": 50}}
    assert confirm.parse("loader.persistent_workers=true").knobs == {"loader": {"persistent_workers": True}}
    assert confirm.parse("threads=1").knobs == {"threads": 1}
    for bad in ("bucket_cap_mb", "model.x=1", "ddp.x="):
        with pytest.raises(command.DoctorError):
            confirm.parse(bad)
    assert confirm.name_of({"loader": {"num_workers": 1, "persistent_workers": True}}) == "num_workers=1"


def test_each_verdict_of_a_knob_can_come_out_either_way():
    faster = spread.compare_rounds([1.0] * 5, [0.8, 0.82, 0.85, 0.79, 0.9])
    slower = spread.compare_rounds([1.0] * 5, [1.1, 1.2, 1.05, 1.11, 1.3])
    mixed = spread.compare_rounds([1.0] * 5, [0.9, 1.1, 0.95, 1.02, 1.0])
    assert confirm.verdict(faster).startswith("confirmed: saves 18%")
    assert confirm.verdict(slower).startswith("refuted: costs 11%")
    assert confirm.verdict(mixed).startswith("not resolvable in 5 rounds")
    assert confirm.verdict(spread.compare_rounds([1.0] * 3, [0.5] * 3)).startswith("not resolvable: 3 rounds")


def test_the_plan_tries_the_knob_each_finding_names():
    from _sim import MIB, simulate
    from ddp_lessons import Run, diagnose
    small = [(48 << 10, i / 24, 0.001) for i in range(24)]
    model = {"kind": "ddp", "bucket_cap_bytes": 50 << 10, "find_unused_parameters": True, "unused_parameter_bytes": 0,
             "grad_bytes": MIB}
    loader = {"num_workers": 0, "persistent_workers": False, "pin_memory": False}
    run = Run(simulate(buckets=small, model=model, data=0.02, threads=1, cores=2, loader=loader))
    d = diagnose(run)
    names = [k.name for k in confirm.plan(d, run)]
    assert SMALL_BUCKETS in d.causes and "bucket_cap_mb=25" in names and "find_unused_parameters=False" in names
    assert ACCUMULATION not in d.causes
    # within the core budget: no loader worker where no core is spare, and it says why ...
    assert not any(n.startswith("num_workers") for n in names)
    assert "no spare core for a loader worker: not tried" in d.finding(DATA).detail
    # ... and on 8 cores (3 spare a rank) as many as the wait needs (20 ms against 45 ms of compute: 2)
    roomy = Run(simulate(buckets=small, model=model, data=0.02, threads=1, cores=8, loader=loader))
    assert "num_workers=2" in [k.name for k in confirm.plan(diagnose(roomy), roomy)]


def test_the_patched_classes_keep_torchs_signatures(tmp_path):
    """Libraries read torch's signatures (Lightning rebuilds a DataLoader from its __init__'s parameters: with
    `*args, **kwargs` in their place it lost the batch size and ran 64 times the steps)."""
    code = f"""
import inspect, os
os.environ["DDP_LESSONS_DOCTOR_DIR"] = {str(tmp_path)!r}
import torch
from torch.utils.data import DataLoader
from torch.nn.parallel import DistributedDataParallel as DDP
before = [inspect.signature(f) for f in (DataLoader.__init__, DDP.__init__, torch.autograd.backward, torch.save)]
import importlib.util
spec = importlib.util.spec_from_file_location("inj", {str(ROOT / "src/ddp_lessons/tool/doctor/rank/inject.py")!r})
inj = importlib.util.module_from_spec(spec); spec.loader.exec_module(inj); inj.install()
after = [inspect.signature(f) for f in (DataLoader.__init__, DDP.__init__, torch.autograd.backward, torch.save)]
assert DataLoader.__init__ is not inj and before == after, (before, after)
print("same")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "same", out.stderr[-2000:]


@pytest.mark.slow
def test_lightnings_ddp_strategy_is_timed_on_every_rank_and_runs_as_it_would(tmp_path):
    script = ROOT / "tests" / "support" / "scripts" / "lightning_ddp.py"
    doc = _run([sys.executable, "-m", "ddp_lessons", "doctor", "--record", "lit", "--", sys.executable, str(script)],
               tmp_path)
    assert doc.returncode == 0 and doc.stdout.count("done") == 2, doc.stderr[-3000:]
    assert "2 rank(s) timed" in doc.stderr
    from ddp_lessons import Run
    run = Run.load(tmp_path / "runs" / "lit.json")
    assert [sum(s["optimizer_steps"] for s in r.steps()) for r in run] == [64, 64]   # as without the doctor


MP = ROOT / "tests" / "support" / "scripts" / "mp_ddp.py"


@pytest.mark.slow
@pytest.mark.parametrize("start", ["fork", "mp.spawn"])
def test_ranks_that_torch_multiprocessing_starts_are_timed(tmp_path, start):
    """Ranks forked by start_processes (they inherit the parent's recorder, and leave through os._exit) and
    spawned by mp.spawn (as the ImageNet example starts them) are timed, each with why it ended; a rank
    planted 50 ms slower in every step is named."""
    doc = _run([sys.executable, "-m", "ddp_lessons", "doctor", "--record", "mp", "--", sys.executable, str(MP),
                "--start", start, "--steps", "24", "--slow-ms", "50", "--threads", "1"], tmp_path)
    assert doc.returncode == 0 and "done 24 steps" in doc.stdout, doc.stderr[-3000:]
    assert "2 rank(s) timed" in doc.stderr and "no rank was timed" not in doc.stderr, doc.stderr[-3000:]
    from ddp_lessons import Run
    run = Run.load(tmp_path / "runs" / "mp.json")
    assert [r.timer["doctor"]["reason"] for r in run] == ["the script ended"] * 2
    assert [sum(s["optimizer_steps"] for s in r.steps()) for r in run] == [24, 24]
    assert "ranks waiting for a slower rank" in doc.stderr and "rank 1 was the late one" in doc.stderr, doc.stderr


def test_the_threads_knob_changes_the_ranks_threads_and_leaves_loader_workers_at_one(tmp_path):
    """`threads=N` holds against the script's own set_num_threads, in the ranks' own processes only: torch's
    loader workers set 1 for themselves and keep it (with the knob in every process they ran N, so the
    experiment changed two things)."""
    ran = command.run([sys.executable, str(MP), "--start", "fork", "--workers", "1", "--say-threads", "--steps", "6"],
                      knobs={"threads": 2}, capture=True, timeout=120)
    assert ran.returncode == 0, ran.stdout
    assert [r["threads"] for r in ran.ranks] == [2, 2]
    assert ran.stdout.count("loader worker threads [1]") == 2, ran.stdout


def test_a_metric_the_script_all_reduces_itself_is_timed_as_a_collective(tmp_path):
    """As Lightning's self.log(..., sync_dist=True) does every step: a collective outside DDP's buckets, timed
    as such (not as the forward's compute), DDP's own all-reduce (through the timing hook) left out."""
    ran = command.run([sys.executable, str(MP), "--start", "fork", "--sync-metric", "--steps", "12"], capture=True,
                      timeout=120)
    assert ran.returncode == 0, ran.stdout
    for r in ran.ranks:
        steps = r["steps"]
        assert [s.get("collective_calls") for s in steps] == [1] * 12
        assert all(0 < s["collectives"] <= s["forward"] + s["backward"] + 1e-9 for s in steps)
    plain = command.run([sys.executable, str(MP), "--start", "fork", "--steps", "12"], capture=True, timeout=120)
    assert not any("collectives" in s for r in plain.ranks for s in r["steps"])


@pytest.mark.slow
def test_an_interrupt_that_reaches_the_ranks_only_is_said_as_such(tmp_path):
    """Ctrl-C delivered to the ranks (not to the doctor): each rank's result says interrupted, the doctor does
    not say every rank reached its end, and the unfinished optimizer step is left out of the per-step counts."""
    import psutil
    env = {**os.environ, "DDP_LESSONS_RUNS": str(tmp_path / "runs"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "ddp_lessons", "doctor", "--record", "int", "--", *TORCHRUN,
                             str(SCRIPT), "--steps", "5000"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("step 3 loss"):
            break
    ranks = [p for p in psutil.Process(proc.pid).children(recursive=True)
             if any(str(SCRIPT) == a for a in p.cmdline()) and "torchrun" not in " ".join(p.cmdline()[:2])]
    assert len(ranks) == 2
    for p in ranks:
        p.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert "(interrupted)" in err and "interrupted: a rank got SIGINT" in err, err[-3000:]
    assert "reached the end of its script" not in err
    from ddp_lessons import Run
    run = Run.load(tmp_path / "runs" / "int.json")
    assert {r.timer["doctor"]["reason"] for r in run} == {"the script was interrupted (SIGINT)"}
    assert "4 all-reduces per optimizer step" in err, err[-3000:]
