"""environment.yml and pyproject.toml must not drift apart; the Makefile pins torch;
CI, the README and `make test` name the same command, and it runs every test."""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def _norm(req):
    return re.sub(r"\s+", "", req).lower()


def _pyproject():
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = proj["optional-dependencies"]
    return proj["dependencies"], extras["course"] + extras["test"]


def _conda_pip():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    return pip, env


def test_environment_yml_lists_what_pyproject_lists():
    deps, test = _pyproject()
    pip, _ = _conda_pip()
    want = {_norm(r) for r in deps + test if not r.startswith("torch")}
    have = {_norm(r) for r in pip if not r.startswith(("torch", "-"))}  # "-": pip options, the course itself
    assert have == want, f"only in environment.yml: {have - want}; only in pyproject.toml: {want - have}"


CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def test_torch_comes_from_pytorchs_cpu_index_in_both_install_paths():
    make = (ROOT / "Makefile").read_text()
    assert "TORCH       ?= torch==2.13.0" in make and f"TORCH_INDEX ?= {CPU_INDEX}" in make
    # what `make install` runs, as make reads it (-B: as on a clean clone)
    cmds = [c for c in _make_dry_run("install", "-B") if "scripts/install_torch.py" in " ".join(c)]
    assert cmds and cmds[0][-4:] == ["--spec", "torch==2.13.0", "--index", CPU_INDEX], cmds
    pip, env = _conda_pip()
    assert f"--extra-index-url {CPU_INDEX}" in pip and "torch==2.13.0+cpu" in pip
    assert pip.index("torch==2.13.0+cpu") < pip.index("-e .")
    deps, _ = _pyproject()
    (torch_req,) = [d for d in deps if d.startswith("torch")]
    # The CPU wheel must satisfy the package's range, or pip would fetch another torch.
    assert Version("2.13.0") in Requirement(torch_req).specifier
    py = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert py == ["python=3.11"]


def _install_torch():
    import importlib.util
    spec = importlib.util.spec_from_file_location("install_torch", ROOT / "scripts" / "install_torch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_cuda_build_is_told_from_a_cpu_build():
    it = _install_torch()
    assert it.is_cuda_build([{"name": "torch", "version": "2.13.0"}, {"name": "nvidia-nccl-cu13", "version": "2"}])
    assert it.is_cuda_build([{"name": "torch", "version": "2.13.0+cu130"}])
    assert not it.is_cuda_build([{"name": "torch", "version": "2.13.0+cpu"}, {"name": "sympy", "version": "1"}])
    assert not it.is_cuda_build([{"name": "torch", "version": "2.13.0"}, {"name": "filelock", "version": "3"}])


@pytest.mark.slow
def test_where_pytorchs_index_is_out_of_reach_this_machines_pip_resolves_the_cpu_build():
    """CI's path: the index does not answer, pip's own sources are asked; here they give the CPU build."""
    it = _install_torch()
    if it.reachable(CPU_INDEX):
        pytest.skip(f"{CPU_INDEX} answers here: make installs from it")
    plan = it.dry_run("torch==2.13.0")
    assert not it.is_cuda_build(plan), plan


@pytest.mark.slow
def test_the_public_index_alone_would_give_a_cuda_build_which_install_torch_refuses():
    """Why the index matters: PyPI's torch for Linux x86-64 is a CUDA build."""
    import platform
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        pytest.skip("PyPI's Linux x86-64 wheel is the CUDA one; elsewhere PyPI serves CPU builds")
    # torch alone (--no-deps): its metadata names the CUDA libraries it would pull in, without
    # resolving each of them (seconds, not a quarter of a minute).
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--quiet",
                          "--ignore-installed", "--no-deps", "--report", "-", "--index-url",
                          "https://pypi.org/simple", "torch==2.13.0"], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        pytest.skip(f"PyPI not reachable here: {out.stderr.strip()[:200]}")
    import json
    (torch,) = [i["metadata"] for i in json.loads(out.stdout)["install"]]
    deps = [r.split(";")[0].split("=")[0].split(">")[0].strip() for r in torch.get("requires_dist", [])
            if "extra ==" not in r]
    plan = [{"name": torch["name"], "version": torch["version"]}] + [{"name": d, "version": "?"} for d in deps]
    assert any(d.startswith("nvidia-") for d in deps), deps
    assert _install_torch().is_cuda_build(plan)


def test_make_lab_serves_the_repository_root_with_autosave_off():
    (lab,) = [c for c in _make_dry_run("lab", "-B") if c[:2] == [".venv/bin/jupyter", "lab"]]
    assert f"--ServerApp.root_dir={ROOT}" in lab  # jupytext finds pyproject.toml's pairing from there
    assert "--LabApp.default_url=/lab/tree/notebooks/00_first_launch.ipynb" in lab
    make = (ROOT / "Makefile").read_text()
    assert '{"@jupyterlab/docmanager-extension:plugin": {"autosave": false}}' in make


def _command_lines(script: str) -> list[str]:
    return [ln.strip() for ln in script.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _readme_section_code(heading: str) -> list[list[str]]:
    """The fenced code blocks of the README section under `## heading`, as lists of lines."""
    text = (ROOT / "README.md").read_text()
    section = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert section, f"README has no '## {heading}' section"
    return [block.strip().splitlines() for block in re.findall(r"^```[a-z]*\n(.*?)^```", section[1], re.M | re.S)]


def _make_dry_run(target: str, *flags: str) -> list[list[str]]:
    """The commands `make TARGET` would run (make's own reading of the Makefile), split."""
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", *flags, "-C", str(ROOT), target], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    text = out.stdout.replace("\\\n", " ")  # a recipe line continued with a backslash is one command
    return [shlex.split(ln) for ln in text.splitlines() if ln.strip() and not ln.startswith("make")]


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


def _pytest_runs(commands: list[list[str]]) -> list[list[str]]:
    """Every pytest invocation in `make -n` output, its arguments after `-m pytest` (shell lists split)."""
    runs = []
    for cmd in commands:
        part = []
        toks = [x for tok in cmd for x in ([tok[:-1], ";"] if tok.endswith(";") and tok != ";" else [tok])]
        for tok in toks + [";"]:
            if tok in (";", "&", "&&", "||", ">", "2>&1"):
                if part[1:3] == ["-m", "pytest"]:
                    runs.append(part[3:])
                part = []
            else:
                part.append(tok)
    return runs


def test_make_test_runs_every_test_and_every_notebook():
    runs = _pytest_runs(_make_dry_run("test"))
    paths = [a for args in runs for a in args if not a.startswith("-") and "/" not in a or a.endswith(".py")]
    assert {"tests", "notebooks"} <= set(paths), runs
    assert any("--nbval" in args and "notebooks" in args for args in runs), runs
    for args in runs:  # in several processes a notebook's cells must stay in one kernel, in order
        if "--nbval" in args and "-n" in args:
            assert args[args.index("--dist") + 1] in ("loadfile", "loadscope"), args
    for args in runs:  # CI runs everything: no marker or keyword left out, and what one run ignores another runs
        assert not {"-m", "-k", "--deselect"} & set(args), args
        ignored = [a.split("=", 1)[1] for a in args if a.startswith("--ignore=")]
        assert all(i in paths for i in ignored), (ignored, runs)


def test_make_quick_leaves_out_only_the_slow_tests_and_the_browser():
    args = _pytest_args(_make_dry_run("quick"))
    assert args[args.index("-m") + 1] == "not slow"
    assert "tests" in args and "notebooks" not in args and "--nbval" not in args


LIGHT_WORKER = '''
import torch
from torch import nn
from ddp_lessons import StepTimer
from ddp_lessons.tool.ddp import wrap_ddp


def train():
    model = wrap_ddp(nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)), torch.device("cpu"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    timer = StepTimer(model, batch_size=8)
    for x in timer.data([torch.randn(8, 16) for _ in range(6)]):
        with timer.phase("forward"):
            loss = model(x).pow(2).mean()
        timer.finish_step(loss, opt)
    return timer.result()
'''
LIGHT_MAIN = '''
import w
from ddp_lessons import Run, diagnose, launch
if __name__ == "__main__":
    run = Run(launch(w.train, world_size=2, timeout=120))
    print("steps", [len(r.steps()) for r in run])
    print(diagnose(run))
    try:
        from ddp_lessons.tool import plots  # noqa: F401
    except ImportError as exc:
        print("plots:", exc)
'''


def _torch_closure() -> set[str]:
    """The installed distributions torch needs, torch included."""
    from importlib import metadata
    todo, seen = ["torch"], set()
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for req in dist.requires or []:
            r = Requirement(req)
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r.name)
    return seen


@pytest.mark.slow
def test_the_light_install_is_the_tool_alone_and_it_runs(tmp_path):
    """`pip install .` beside a torch already there: none of the course's packages, and launch, StepTimer
    and diagnose work from it (the figures say which extra they need, in one line)."""
    from importlib import metadata
    (tmp_path / "checkout").mkdir()
    site = tmp_path / "torch-site"   # torch and what it needs, as a machine with torch already has them
    site.mkdir()
    for name in _torch_closure():
        dist = metadata.distribution(name)
        base = Path(dist.locate_file(""))
        for top in {Path(str(f)).parts[0] for f in dist.files or []}:
            if not (site / top).exists() and (base / top).exists() and not top.startswith(".."):
                (site / top).symlink_to(base / top)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    (sp,) = (venv / "lib").glob("python3*/site-packages")
    (sp / "torch-there.pth").write_text(str(site) + "\n")
    py = venv / "bin" / "python"
    src = tmp_path / "checkout"   # a copy: setuptools builds in the source folder, and the checkout keeps no build/
    for part in ("pyproject.toml", "README.md", "LICENSE", "src"):
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, src / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(ROOT / part, src / part)
    out = subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(src)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True,
                            timeout=120).stdout.lower()
    for heavy in ("jupyterlab", "pytorch-lightning", "nvidia-ml-py", "ipywidgets", "matplotlib"):
        assert f"{heavy}==" not in listed, heavy
    (tmp_path / "w.py").write_text(LIGHT_WORKER)
    (tmp_path / "main.py").write_text(LIGHT_MAIN)
    ran = subprocess.run([str(py), "main.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "steps [6, 6]" in ran.stdout and "diagnosis of 2 of 2 rank(s)" in ran.stdout, ran.stdout
    assert "plots: ddp_lessons' figures need matplotlib: pip install 'ddp-lessons[plots]'" in ran.stdout
    # the tool's commands read no case of the course
    for cmd in ("doctor", "diagnose"):
        helped = subprocess.run([str(py), "-m", "ddp_lessons", cmd, "--help"], cwd=tmp_path, capture_output=True,
                                text=True, timeout=120)
        assert helped.returncode == 0 and "usage:" in helped.stdout, helped.stderr[-2000:]
