"""`Step`: a timer's step read once into named fields (an absent number None, not 0), its JSON still
answering under its own names; `Run` and `diagnose` read what they are given and write nothing into it."""

import copy
import dataclasses

import pytest
import torch
from _sim import simulate

from ddp_lessons import Run, compare, diagnose
from ddp_lessons.tool.runs import Bucket, Rank, Step
from ddp_lessons.tool.timing import StepTimer
from ddp_lessons.tool.timing.comm import _apply_light, _comm_numbers

FIELDS = {f.name for f in dataclasses.fields(Step)} - {"wire"}


def _timed(n=4):
    """A plain model timed in this process: a loader, the usual phases, one of the loop's own."""
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    timer = StepTimer(model)
    for x in timer.data([torch.randn(2, 4) for _ in range(n)]):
        with timer.phase("forward"):
            loss = model(x).sum()
        with timer.phase("backward"):
            loss.backward()
        with timer.phase("log"):
            loss.item()
        opt.step()
        timer.step_done()
    return timer.result()


def test_every_number_the_timer_writes_is_a_field():
    steps = _timed()["steps"]
    written = {k for s in steps for k in s} - {"log"}       # "log": a phase of the loop's own
    comm = _comm_numbers([{"start": 0.0, "end": 1.0, "sent": 0.1, "bytes": 8}], (0.0, 1.0))
    light = {"exposed": 0.1, "backward_compute": 0.2, "computed": 0.3, "backward": 0.3, "sync": True}
    _apply_light(light, {"allreduce_span": 0.2, "exposed": 0.1, "calls": 1, "grad_bytes": 8},
                 [{"index": 0, "duration": 0.1, "bytes": 8}], True, True)
    on_gpu = {"host", "lag", "data_stall", "collectives", "collective_calls", "collective_spans", "wait"}
    assert written | set(comm) | set(light) | on_gpu <= FIELDS, (written | set(comm) | set(light) | on_gpu) - FIELDS
    step = Rank(_timed()).steps()[1]
    assert step.seconds("log") == step["log"] == step.phases["log"][1] - step.phases["log"][0]
    assert step.optimizer_steps == 1 and step.forward > 0 and step.data >= 0 and step.buckets == ()


def test_an_absent_number_is_none_and_the_json_answers_as_the_dict_did():
    s = Step.from_wire({"step": 3, "step_time": 0.1, "data": 0.0})
    assert (s.exposed, s.wait, s.allreduce_calls, s.ready, s.buckets) == (None, None, None, None, ())
    assert dict(s.phases) == {} and s.backward_own == 0.0 and not s.all_reduced
    assert s.data == 0.0 and s["data"] == 0.0 and s.get("exposed", 0.5) == 0.5 and "exposed" not in s
    with pytest.raises(KeyError):
        s["exposed"]
    wire = simulate(transfer=0.01)[0]["steps"][5]
    step = Step.from_wire(wire)
    assert all(step[k] == v and step.get(k) == v and k in step for k, v in wire.items())
    assert step.buckets == (Bucket(0, wire["buckets"][0]["start"], wire["buckets"][0]["end"], 16 << 20, 16 << 20),)
    assert step.buckets[0].handed == step.buckets[0].start and step.all_reduced and step.wait == wire["wait"]


def test_run_and_diagnose_leave_what_they_are_given_as_it_was():
    values = simulate(forward=[0.02, 0.03], waits=False, outside=[(0, 9, "eval", 0.5)])   # the doctor's: no waits
    before = copy.deepcopy(values)
    run = Run(values)
    diagnose(values)
    diagnose(values, iterations=100)
    compare({"a": values, "b": values})
    assert values == before
    # the waits worked out across the ranks are the run's own steps', not written into the input
    assert all(s.wait is not None for s in run[0].steps() if s.sync) and "wait" not in values[0]["steps"][5]
    given = Rank(values[0])
    Run([given, values[1]])
    assert all(s.wait is None for s in given.steps())       # a Rank passed in is not changed either
    assert Run(run)[0].steps() == run[0].steps()
