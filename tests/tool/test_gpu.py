"""On a CUDA GPU (marker `gpu`; skipped elsewhere): the timer keeps each phase's host span beside its
CUDA-event span, and the doctor times a script on the GPU."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU here")]
SCRIPT = Path(__file__).resolve().parents[1] / "support" / "scripts" / "plain_ddp.py"


def test_a_gpu_timer_keeps_host_spans_and_says_its_clock():
    import torch
    from ddp_lessons import Run, StepTimer, diagnose
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    timer = StepTimer(model)
    for _ in range(8):
        with timer.phase("forward"):
            loss = model(torch.randn(32, 64, device="cuda")).sum()
        timer.finish_step(loss, opt)
    res = timer.result()
    assert res["clock"]["kind"] == "cuda events" and all("host" in s for s in res["steps"])
    d = diagnose(Run([res]))
    assert any("CUDA events" in n for n in d.notes)


def test_the_doctor_times_a_script_on_the_gpu(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ddp_lessons", "doctor", "--", sys.executable, str(SCRIPT),
                          "--steps", "6"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "1 rank(s) timed" in out.stderr, out.stderr[-2000:]
