"""Faults of the launching process: stopped by SIGTERM, killed by SIGKILL, slow to start its workers.

Each leaves no worker and no run directory behind (for SIGKILL: once the next
launch has swept it), and a launch whose workers are slow to start says so,
not that a collective hung.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from ddp_lessons import WorkerTimeout, launch
from ddp_lessons.cases.intro import workers as toy
from ddp_lessons.tool.launcher import cleanup

TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support")

LAUNCHER = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {tests!r})
    os.environ["DDP_LESSONS_TEST_IMPORT_S"] = "0"  # this process imports the module at once,
    import {module} as w
    os.environ["DDP_LESSONS_TEST_IMPORT_S"] = {child_import_s!r}  # its workers slowly
    from ddp_lessons import launch
    print("launching", flush=True)
    launch(w.{worker}, world_size=2, timeout=300)
""")


def _descendants(pid):
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _run_dirs(tmp):
    return sorted(p.name for p in Path(tmp).iterdir() if p.name.startswith(cleanup.PREFIX))


def _start(tmp, module, worker, child_import_s="0"):
    env = dict(os.environ, TMPDIR=str(tmp))
    code = LAUNCHER.format(tests=TESTS, module=module, worker=worker, child_import_s=child_import_s)
    return subprocess.Popen([sys.executable, "-c", code],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for(cond, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}: not after {timeout_s} s")


def _workers_started(tmp):
    # a run directory holds one log per rank once that rank has started capturing its output
    dirs = [Path(tmp) / d for d in _run_dirs(tmp)]
    return any(len(list(d.glob("rank*.log"))) == 2 for d in dirs)


@pytest.mark.slow
@pytest.mark.parametrize("when", ["running", "starting"])
def test_sigterm_to_the_parent_leaves_no_worker_and_no_directory(tmp_path, when):
    module = "_launch_workers" if when == "running" else "_slow_import_workers"
    proc = _start(tmp_path, module, "sleep_forever", child_import_s="30")
    if when == "running":
        _wait_for(lambda: _workers_started(tmp_path), 60, "both workers running")
    else:  # the run directory exists, the workers are still importing their module
        _wait_for(lambda: _run_dirs(tmp_path) and len(_descendants(proc.pid)) >= 2, 60, "workers starting")
        time.sleep(0.5)
    family = _descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, proc.returncode
    _, alive = psutil.wait_procs(family, timeout=5)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], [p.cmdline() for p in alive]
    assert _run_dirs(tmp_path) == []


@pytest.mark.slow
def test_interrupt_while_the_workers_start_leaves_no_worker_and_no_directory(tmp_path):
    # Jupyter's interrupt lands whenever the learner presses it, also inside
    # Process.start() while the fork server is still importing torch.
    code = ("try:\n" + textwrap.indent(LAUNCHER.format(tests=TESTS, module="_slow_import_workers",
                                                     worker="sleep_forever", child_import_s="30"), "    ")
            + "except KeyboardInterrupt:\n    print('interrupted', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ, TMPDIR=str(tmp_path)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    _wait_for(lambda: _run_dirs(tmp_path), 60, "the launch started")
    family = _descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert "interrupted" in out, out
    _, alive = psutil.wait_procs(family, timeout=10)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], [p.cmdline() for p in alive]
    # a worker the fork server made after `family` was read is still in the session
    _wait_for(lambda: not _in_session(proc.pid), 10, "every process of the session gone")
    assert _run_dirs(tmp_path) == []


def _in_session(sid):
    def member(p):
        try:
            return os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
            return False
    return [p for p in psutil.process_iter() if member(p)]


@pytest.mark.slow
def test_sigkill_of_the_parent_ends_the_workers_and_the_next_launch_sweeps_its_directory(tmp_path, monkeypatch):
    proc = _start(tmp_path, "_launch_workers", "sleep_forever")
    _wait_for(lambda: _workers_started(tmp_path), 60, "both workers running")
    family = _descendants(proc.pid)
    left = _run_dirs(tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    _, alive = psutil.wait_procs(family, timeout=10)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], [p.cmdline() for p in alive]
    assert _run_dirs(tmp_path) == left and len(left) == 1  # SIGKILL: nothing could clean up
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    launch(toy.hello, world_size=2)
    assert _run_dirs(tmp_path) == []


def test_sweep_keeps_the_directory_of_a_live_launching_process(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    mine = cleanup.run_directory()
    dead = tmp_path / f"{cleanup.PREFIX}dead"
    dead.mkdir()
    (dead / cleanup.OWNER).write_text("999999999 123.0")
    unowned = tmp_path / f"{cleanup.PREFIX}being-made"
    unowned.mkdir()
    assert cleanup.sweep() == [str(dead)]
    assert sorted(_run_dirs(tmp_path)) == sorted([Path(mine).name, unowned.name])
    for d in (mine, unowned):
        os.rmdir(d) if not os.listdir(d) else __import__("shutil").rmtree(d)


@pytest.mark.slow
def test_workers_slow_to_start_are_named_as_such_not_as_a_hang(monkeypatch):
    sys.path.insert(0, TESTS)
    monkeypatch.setenv("DDP_LESSONS_TEST_IMPORT_S", "4")
    import _slow_import_workers as slow
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout) as info:
        launch(slow.hello, world_size=2, timeout=60, startup_timeout=1.5)
    assert time.monotonic() - t0 < 1.5 + 5
    assert info.value.summary.startswith("rank(s) 0, 1 did not start within 1.5 s"), info.value.summary
    assert "startup_timeout=" in info.value.summary and "collective" not in info.value.summary


@pytest.mark.slow
def test_the_run_timeout_counts_from_every_ranks_start(monkeypatch):
    sys.path.insert(0, TESTS)
    monkeypatch.setenv("DDP_LESSONS_TEST_IMPORT_S", "3")
    import _slow_import_workers as slow
    # 3 s to start, well past timeout=2: the run itself is short, so it passes
    assert launch(slow.hello, world_size=2, timeout=2) == [1, 1]


@pytest.mark.parametrize("where", ["run_directory", "_prepare"])
def test_an_interrupt_while_the_run_is_being_set_up_leaves_no_directory(tmp_path, monkeypatch, where):
    # The interrupt the test above sends can land before `launch` holds a run to close:
    # while the directory is made, or while the pipes and the fork server's settings are.
    import importlib
    parent = importlib.import_module("ddp_lessons.tool.launcher.parent")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    real_open = open

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    if where == "run_directory":  # the owner file is being written
        monkeypatch.setattr("builtins.open", lambda path, *a, **k: interrupted() if str(path).endswith(
            cleanup.OWNER) else real_open(path, *a, **k))
    else:
        monkeypatch.setattr(parent._Run, "_prepare", interrupted)
    with pytest.raises(KeyboardInterrupt):
        launch(toy.hello, world_size=2)
    assert _run_dirs(tmp_path) == []


def test_a_removed_run_directory_takes_no_new_file_by_its_old_path(tmp_path):
    # what a worker forked after the launch was stopped would do: open a file by the path
    path = tmp_path / f"{cleanup.PREFIX}x"
    path.mkdir()
    (path / "rank0.log").write_text("a worker's log")
    cleanup.remove(str(path))
    with pytest.raises(FileNotFoundError):
        (path / "rank1.log").write_text("too late")
    assert _run_dirs(tmp_path) == []
