"""benchmarks/record_own_run_gpu.py on CPUs: what it writes, not what it measured.

On a machine without a GPU the script runs notebook 07's workload on gloo at
world size 1 (a tiny size, `--quick`): the record names the machine, holds
both setups' rounds, and says why the NCCL lines and nvidia-smi are absent;
the trace folder holds one gzipped trace per rank that carries its rank the
way Holistic Trace Analysis reads it.
"""

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "record_own_run_gpu.py"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("own-run")
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--quick", "--rounds", "1",
                        "--backend", "gloo"], capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return out


@pytest.mark.slow
def test_the_record_names_the_machine_and_holds_both_setups(recorded):
    rec = json.loads((recorded / "record.json").read_text())
    assert rec["kind"] == "own-run" and rec["machine"]["torch"]
    assert rec["config"]["backend"] == "gloo" and rec["config"]["world_size"] == 1
    runs = rec["results"]["rounds"]["runs"]
    assert set(runs) == {"broken", "fixed"} and all(len(v) == 1 for v in runs.values())
    run = runs["broken"][0]
    assert run["world_size"] == 1 and run["epochs"] and run["timer"]["steps"]
    assert {"train_s", "eval_s", "steps"} <= set(run["epochs"][0])


@pytest.mark.slow
def test_the_trace_is_laid_out_for_holistic_trace_analysis(recorded):
    files = sorted(p.name for p in (recorded / "trace").iterdir())
    assert files == ["rank-0.json.gz"]   # nothing else: HTA reads every .json/.gz in the folder
    with gzip.open(recorded / "trace" / files[0], "rt") as f:
        trace = json.load(f)
    assert trace["distributedInfo"]["rank"] == 0
    assert "host_name" not in trace and trace["traceEvents"]
    assert not any(e.get("cat") == "kernel" for e in trace["traceEvents"])   # no CUDA activity on gloo
    assert json.loads((recorded / "record.json").read_text())["results"]["trace"]["trace"] == "trace/rank-0.json.gz"


@pytest.mark.slow
def test_what_is_absent_says_why(recorded):
    res = json.loads((recorded / "record.json").read_text())["results"]
    assert res["nccl_debug"]["lines"] == [] and "gloo" in res["nccl_debug"]["reason"]
    if shutil.which("nvidia-smi") is None:
        for key in ("nvidia_smi_topo", "nvidia_smi_q"):
            assert res[key]["text"] is None and "nvidia-smi" in res[key]["reason"]


def test_a_failed_child_records_nothing(tmp_path):
    # A backend that cannot start on this machine fails in the child: exit 1, no record.
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""}
    p = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--quick", "--backend", "nccl"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 1 and "nothing recorded" in p.stderr
    assert not (tmp_path / "record.json").exists()
