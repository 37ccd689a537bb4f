"""environment.yml and pyproject.toml must not drift apart; the Makefile pins torch;
CI, the README and `make test` name the same command, and it runs every test."""

import os
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _norm(req):
    return re.sub(r"\s+", "", req).lower()


def _pyproject():
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return proj["dependencies"], proj["optional-dependencies"]["test"]


def _conda_pip():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    return pip, env


def test_environment_yml_lists_what_pyproject_lists():
    deps, test = _pyproject()
    pip, _ = _conda_pip()
    want = {_norm(r) for r in deps + test if not r.startswith("torch")}
    have = {_norm(r) for r in pip if not r.startswith(("torch", "-e"))}
    assert have == want, f"only in environment.yml: {have - want}; only in pyproject.toml: {want - have}"


def test_torch_is_pinned_to_the_cpu_wheel_in_both_install_paths():
    pip, env = _conda_pip()
    assert "torch==2.13.0" in pip and pip.index("torch==2.13.0") < pip.index("-e .")
    assert "TORCH   := torch==2.13.0" in (ROOT / "Makefile").read_text()
    deps, _ = _pyproject()
    (torch_req,) = [d for d in deps if d.startswith("torch")]
    # The pinned CPU wheel must satisfy the package's range, or pip would fetch another torch.
    assert Version("2.13.0") in Requirement(torch_req).specifier
    py = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert py == ["python=3.11"]


def _command_lines(script: str) -> list[str]:
    return [ln.strip() for ln in script.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _readme_section_code(heading: str) -> list[list[str]]:
    """The fenced code blocks of the README section under `## heading`, as lists of lines."""
    text = (ROOT / "README.md").read_text()
    section = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert section, f"README has no '## {heading}' section"
    return [block.strip().splitlines() for block in re.findall(r"^```[a-z]*\n(.*?)^```", section[1], re.M | re.S)]


def _make_dry_run(target: str) -> list[list[str]]:
    """The commands `make TARGET` would run (make's own reading of the Makefile), split."""
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", "-C", str(ROOT), target], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [shlex.split(ln) for ln in out.stdout.splitlines() if ln.strip() and not ln.startswith("make")]


def _pytest_args(commands: list[list[str]]) -> list[str]:
    (cmd,) = [c for c in commands if c[1:3] == ["-m", "pytest"]]
    return cmd[3:]


def test_ci_runs_the_readme_test_command():
    ci = ROOT / ".ci" / "run"
    assert os.access(ci, os.X_OK)
    lines = _command_lines(ci.read_text())
    assert lines[-1] == "make test", f"the CI script's last command is {lines[-1]!r}"
    assert "set -euo pipefail" in lines  # an earlier failing line would stop it
    assert ["make test"] in _readme_section_code("Run the tests")


def test_make_test_runs_every_test_and_every_notebook():
    args = _pytest_args(_make_dry_run("test"))
    assert "--nbval" in args and {"tests", "notebooks"} <= set(args)
    # CI runs everything: no marker, keyword or path left out.
    assert not {"-m", "-k", "--deselect", "--ignore"} & set(args), args


def test_make_quick_leaves_out_only_the_slow_tests_and_the_browser():
    args = _pytest_args(_make_dry_run("quick"))
    assert args[args.index("-m") + 1] == "not slow"
    assert "tests" in args and "notebooks" not in args and "--nbval" not in args
