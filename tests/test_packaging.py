"""environment.yml and pyproject.toml must not drift apart; the Makefile pins torch."""

import re
import tomllib
from pathlib import Path

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


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make test" in ci
