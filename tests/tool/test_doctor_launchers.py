"""The doctor under launchers a test elsewhere does not cover: Lightning's `self.log(..., sync_dist=True)` (its
all-reduce every step, seen as the script's own collective), and `accelerate launch` where it is installed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "support" / "scripts"


def _doctor(args, tmp_path, record):
    env = {**os.environ, "DDP_LESSONS_RUNS": str(tmp_path / "runs")}
    return subprocess.run([sys.executable, "-m", "ddp_lessons", "doctor", "--record", record, "--", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)


def _collectives(rank) -> tuple[int, dict]:
    """The collectives a rank made outside DDP's buckets: in its steps, and between them by function."""
    inside = sum(s.get("collective_calls") or 0 for s in rank.steps())
    between: dict = {}
    for o in rank.outside:
        if o["name"].startswith("collectives between steps"):
            between[o["name"]] = between.get(o["name"], 0) + 1
    return inside, between


@pytest.mark.slow
def test_lightnings_sync_dist_logging_is_seen_as_the_scripts_own_all_reduce(tmp_path):
    pytest.importorskip("pytorch_lightning")
    from ddp_lessons import Run
    synced = _doctor([sys.executable, str(SCRIPTS / "lightning_ddp.py"), "--sync-dist"], tmp_path, "sync")
    plain = _doctor([sys.executable, str(SCRIPTS / "lightning_ddp.py")], tmp_path, "plain")
    assert synced.returncode == plain.returncode == 0, synced.stderr[-3000:]
    with_sync, without = Run.load(tmp_path / "runs" / "sync.json"), Run.load(tmp_path / "runs" / "plain.json")
    for r in with_sync:
        assert _collectives(r)[0] >= 64, r.rank       # in the step: one a training step at least (64 a rank)
    for r in without:
        inside, between = _collectives(r)
        assert inside == 0
        # Lightning's own between steps, named by function (a broadcast at nearly every step's end here)
        assert all("(" in name for name in between), between


@pytest.mark.slow
def test_accelerate_launch_is_timed_on_every_rank(tmp_path):
    accelerate = Path(sys.executable).parent / "accelerate"
    if not accelerate.exists():
        pytest.skip("accelerate is not installed")
    from ddp_lessons import Run
    doc = _doctor([str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                   "--mixed_precision", "no", "--dynamo_backend", "no", str(SCRIPTS / "plain_ddp.py"), "--steps", "8"],
                  tmp_path, "acc")
    assert doc.returncode == 0 and "2 rank(s) timed" in doc.stderr, doc.stderr[-3000:]
    assert len(Run.load(tmp_path / "runs" / "acc.json")) == 2
