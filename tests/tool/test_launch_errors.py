"""What `launch` says when it is called wrongly or its workers fail in ways a
learner's own script meets: a script without the __main__ guard, ranks that
fail each on their own, no deadline, keyword arguments."""

import subprocess
import sys
import textwrap

import pytest

import _error_workers as ew
from ddp_lessons import LaunchConfigError, WorkerFailed, launch
from ddp_lessons.cases.intro import workers


def test_keyword_arguments_reach_the_worker():
    out = launch(ew.echo, (1,), {"b": 2, "scale": 10}, world_size=2)
    assert [r["value"] for r in out] == [30, 30]


@pytest.mark.parametrize("timeout", [None, float("inf")])
def test_no_deadline(timeout):
    assert [r["sum"] for r in launch(workers.hello, world_size=2, timeout=timeout)] == [3.0, 3.0]


@pytest.mark.parametrize("bad", [0, -1.0, "60", True, float("nan")])
def test_nonsense_timeout_is_refused_before_start(bad):
    with pytest.raises(LaunchConfigError, match="timeout="):
        launch(workers.hello, world_size=2, timeout=bad)


def test_ranks_failing_on_their_own_are_not_called_collateral():
    with pytest.raises(WorkerFailed) as info:
        launch(ew.each_rank_raises, world_size=2)
    msg = info.value.summary
    assert "has its own problem" in msg
    assert "also failed, each on its own" in msg and "lost a partner" not in msg
    assert set(info.value.reports) == {0, 1}


def test_script_without_main_guard_is_told_about_it(tmp_path):
    script = tmp_path / "no_guard.py"
    script.write_text(textwrap.dedent("""
        from ddp_lessons import launch
        from ddp_lessons.cases.intro import workers
        print(launch(workers.hello, world_size=2))
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert proc.returncode != 0
    assert "WorkerFailed" in proc.stderr
    assert 'if __name__ == "__main__":' in proc.stderr
    assert "its traceback follows" not in proc.stderr


def test_worker_output_of_a_successful_run_is_kept():
    out = launch(ew.chatty, world_size=2)
    assert list(out) == [0, 1]
    assert all(f"rank {r} says hello" in out.logs[r] and f"rank {r} warns" in out.logs[r] for r in (0, 1))


def test_under_torchrun_launch_options_are_named_as_ignored():
    code = ("import socket, os\n"
            "s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()\n"
            "os.environ.update(RANK='0', LOCAL_RANK='0', WORLD_SIZE='1', LOCAL_WORLD_SIZE='1',\n"
            "                  MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), TORCHELASTIC_RUN_ID='t')\n"
            "from ddp_lessons import run\n"
            "from ddp_lessons.cases.intro import workers\n"
            "print(run(workers.hello, world_size=2, timeout=5, threads=1)[0]['sum'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "1.0"
    assert "under torchrun, launch options threads, timeout are ignored" in out.stderr
