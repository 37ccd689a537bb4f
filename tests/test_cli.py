"""`python -m ddp_lessons COMMAND` starts for every command, in a fresh interpreter
(an import cycle between a case module and its CLI shows only there)."""

import subprocess
import sys

import pytest

from ddp_lessons.cli import COMMANDS


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_parses_its_arguments(command):
    out = subprocess.run([sys.executable, "-m", "ddp_lessons", command, "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"usage: python -m ddp_lessons {command}" in out.stdout


def test_unknown_command_is_refused_with_the_list():
    out = subprocess.run([sys.executable, "-m", "ddp_lessons", "nope"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "invalid choice: 'nope'" in out.stderr
