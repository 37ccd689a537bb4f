"""`python -m ddp_lessons COMMAND`: every command starts with the package imported fresh (an
import cycle between a case module and its CLI shows only there), and every input
error is a one-line usage message with exit status 2, given before any work."""

import subprocess
import sys

import pytest

from ddp_lessons import cli
from ddp_lessons.tool import records
from ddp_lessons.cli import commands


# One interpreter imports torch (seconds), then forks a child per command, in which the package is
# imported fresh and `python -m ddp_lessons COMMAND --help` runs as from a shell.
_FORK_PER_COMMAND = r"""
import os, runpy, sys
import torch  # noqa: F401 - what every command imports; ddp_lessons itself is not imported here
for command in sys.argv[1:]:
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        sys.argv = ["ddp_lessons", command, "--help"]
        code = 0
        try:
            runpy.run_module("ddp_lessons", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException as e:
            print(repr(e), file=sys.stderr)
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    print(f"\n=== {command} exit {os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}", flush=True)
"""


def test_every_command_parses_its_arguments():
    names = sorted(commands())
    out = subprocess.run([sys.executable, "-c", _FORK_PER_COMMAND, *names], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    parts = out.stdout.split("\n=== ")
    for command, part in zip(names, parts, strict=False):
        assert f"usage: python -m ddp_lessons {command}" in part, f"{command}: {out.stderr[-2000:]}"
    ends = [p.splitlines()[0] for p in parts[1:]]
    assert ends == [f"{c} exit 0" for c in names], (ends, out.stderr[-2000:])


def test_unknown_command_is_refused_with_the_list():
    out = subprocess.run([sys.executable, "-m", "ddp_lessons", "nope"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "invalid choice: 'nope'" in out.stderr


def _refused(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as info:
        cli.main(list(argv))
    assert info.value.code == 2, info.value.code
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("python -m ddp_lessons"), err  # argparse's one-line "prog: error: ..."
    return err[-1]


@pytest.mark.parametrize("argv, says", [
    (["hello", "--nproc", "0"], "--nproc: '0': use a whole number >= 1"),
    (["hello", "--nproc", "two"], "--nproc: 'two': use a whole number >= 1"),
    (["allreduce", "--timeout", "-5"], "--timeout: '-5': use a number of seconds > 0"),
    (["case1", "--epochs", "0"], "--epochs: '0'"),
    (["case1", "--set", "evaluation=sometimes"], "--set"),
    (["case2", "--widths", "64,x"], "--widths: '64,x': use widths >= 1"),
    (["case2", "--train-batches", "0"], "--train-batches: '0'"),
])
def test_bad_input_is_one_line_with_status_2(capsys, argv, says):
    assert says in _refused(capsys, *argv)


def test_a_taken_record_name_is_refused_before_the_run(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(records, "RUNS_DIR", tmp_path)
    (tmp_path / "mine.json").write_text("{}")
    line = _refused(capsys, "hello", "--record", "mine")
    assert "data/runs/mine.json exists; pass --overwrite" in line


@pytest.mark.parametrize("command", ["hello", "train-mlp"])
def test_every_command_that_takes_record_saves_it(capsys, tmp_path, monkeypatch, command):
    monkeypatch.setattr(records, "RUNS_DIR", tmp_path)
    extra = ["--steps", "4", "--width", "32", "--depth", "1", "--batch", "8"] if command == "train-mlp" else []
    assert cli.main([command, "--record", "saved", *extra]) == 0
    rec = records.load(tmp_path / "saved.json")
    assert rec["kind"] == command and rec["commit"] != ""
