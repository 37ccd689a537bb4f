"""Notebook 00's workers on 2 gloo ranks: the timed MLP read through `Run`, and the interleaved sizes."""

import pytest

from ddp_lessons import Run, launch
from ddp_lessons.cases.intro import Options, readout, workers
from ddp_lessons.cases.intro import train

pytestmark = pytest.mark.slow


def test_the_timed_mlp_returns_its_steps_ddps_clock_and_what_it_sent():
    o = Options.preset("check", steps=6)
    run = Run(launch(train.train, (o,), world_size=2))
    assert len(run) == 2 and all(len(r.steps()) == 6 for r in run)
    assert len(run[0]["ddp_logging"]) == 5                  # DDP reports step k at step k+1's forward
    assert run[0]["comm_hook"] == "timed_comm_hook" and run[0]["grad_bytes"] == 4 * (32 * 256 + 256 + 256 * 256
                                                                                     + 256 + 256 + 1)
    c = readout.clocks(run)
    assert c["steps"] == 3 and c["hook"] > 0 and c["head"] is not None   # the hook's own time, apart


def test_train_mlp_keeps_the_arguments_the_tool_tests_pass():
    out = launch(workers.train_mlp, (4, 64, 1, 8, 25.0, False), world_size=2)
    assert all(r["steps"] == [] and not r["comm_hook"] for r in out)


def test_interleaved_times_every_size_once_a_round_on_every_rank():
    out = launch(workers.interleaved, ([4096, 65536], 3, 1), world_size=2)
    assert [r["sizes"] for r in out] == [[4096, 65536]] * 2
    assert all(len(t) == 3 and min(t) > 0 for r in out for t in r["times"])
