"""Workers for tests/tool/test_timing.py (spawned children import this module by name)."""

import torch
import torch.distributed as dist

from ddp_lessons.tool import hooks
from ddp_lessons.tool.ddp import gradient_bytes, wrap_ddp
from ddp_lessons.course.toy import mlp
from ddp_lessons.tool.hooks import allreduce_hook
from ddp_lessons.cases.intro import workers as toy
from ddp_lessons.tool.timing import StepTimer


def count_sent_bytes(timed, comm_dtype, steps=4):
    """`toy.train_mlp`, counting what reaches `dist.all_reduce` (where torch's
    Python hooks send), independently of the timer."""
    sent, real = [], dist.all_reduce

    def counting_all_reduce(tensor, *args, **kwargs):
        sent.append((tensor.numel() * tensor.element_size(), str(tensor.dtype)))
        return real(tensor, *args, **kwargs)
    dist.all_reduce = counting_all_reduce  # torch's hooks look it up on each call
    try:
        out = toy.train_mlp(steps, 256, 2, 16, 25.0, timed, 0.0, comm_dtype)
    finally:
        dist.all_reduce = real
    out["sent_bytes"] = sum(n for n, _ in sent)
    out["sent_dtypes"] = sorted({d for _, d in sent})
    out["n_steps"] = steps
    return out


def _zeroing_hook(calls, bucket):
    """A user's own hook: all-reduce as usual, then hand DDP zeros instead."""
    calls.append(bucket.index())
    return allreduce_hook(None, bucket).then(_zeros)


def _zeros(fut):
    return fut.value().zero_()


def _small_ddp_mlp(bucket_cap_mb=0.01, width=64, depth=2):
    torch.manual_seed(0)
    return wrap_ddp(mlp(width, depth), torch.device("cpu"), bucket_cap_mb=bucket_cap_mb)  # a few buckets


def own_hook(timed, steps=3):
    """The user's hook given to the timer: how often it ran, what the timer saw,
    whether the parameters moved (they must not: the hook sends zeros)."""
    model = _small_ddp_mlp()
    calls = []
    timer = StepTimer(model, enabled=timed, hook=_zeroing_hook, state=calls)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        with timer.phase("forward"):
            loss = model(torch.randn(8, 32)).pow(2).mean()
        timer.finish_step(loss, opt)
    steps_seen = timer.result()["steps"] if timed else []
    return {"calls": len(calls), "timed_buckets": sum(s["allreduce_calls"] for s in steps_seen),
            "changed": any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True)),
            "comm_hook": model._get_ddp_logging_data().get("comm_hook", "")}


def hook_already_registered():
    """A model with a hook of its own, then a timer: the error message (or None)."""
    model = _small_ddp_mlp()
    model.register_comm_hook(None, allreduce_hook)
    StepTimer(model, enabled=False)  # registers nothing: no error
    try:
        StepTimer(model)
    except RuntimeError as exc:
        return str(exc)
    return None


def hook_after_timer():
    """A timer that registered its hook (mode "full" on gloo), then the user's own: the error message."""
    model = _small_ddp_mlp()
    StepTimer(model, mode="full")
    try:
        model.register_comm_hook(None, allreduce_hook)
    except RuntimeError as exc:
        return str(exc)
    return None


def light_mode(steps=6, delay_s=0.0, ddp_logging=True, mode="light"):
    """The same small DDP loop timed in mode `mode`; a known delay per bucket
    (`hooks.delayed`, registered as it is in mode "light") when `delay_s`."""
    model = _small_ddp_mlp(bucket_cap_mb=1.0, width=512, depth=4)
    timer = StepTimer(model, mode=mode, hook=hooks.delayed(None, delay_s), ddp_logging=ddp_logging)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(steps):
        with timer.phase("forward"):
            loss = model(torch.randn(16, 32, generator=g)).pow(2).mean()
        timer.finish_step(loss, opt)
    out = timer.result()
    out["grad_bytes"] = gradient_bytes(model)
    out["comm_hook"] = model._get_ddp_logging_data().get("comm_hook", "")
    return out


def light_unused_last(steps=6, skip_from=3):
    """Mode "light" on a model whose last parameter (a second head) is used until step `skip_from` and not
    after (find_unused_parameters): the compute end's hook, registered once on that parameter, misses its
    backward from there on. Returns the result, and whether the marker went to each step's own hook."""
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.a, self.b = nn.Linear(32, 64), nn.Linear(64, 1), nn.Linear(64, 1)

        def forward(self, x, both=True):
            h = self.body(x).relu()
            return self.a(h) + self.b(h) if both else self.a(h)
    model = DDP(TwoHeads(), find_unused_parameters=True)
    timer = StepTimer(model, mode="light", ddp_logging=False)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for i in range(steps):
        with timer.phase("forward"):
            loss = model(torch.randn(16, 32), both=i < skip_from).pow(2).mean()
        timer.finish_step(loss, opt)
    per_step = timer.compute_end_per_step
    out = timer.result()
    out["per_step"] = per_step
    return out


def light_straggler(steps=30, slow_s=0.02, ddp_logging=False):
    """Mode "light" (a GPU's: DDP's own all-reduce) with rank 1 computing `slow_s` more in every forward;
    `ddp_logging`: DDP's own timings read as a GPU once read them (every 10th step) or not at all."""
    import time
    model = _small_ddp_mlp(bucket_cap_mb=1.0, width=256, depth=2)
    timer = StepTimer(model, mode="light", ddp_logging=ddp_logging)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(steps):
        with timer.phase("forward"):
            if dist.get_rank() == 1:
                time.sleep(slow_s)
            loss = model(torch.randn(16, 32, generator=g)).pow(2).mean()
        timer.finish_step(loss, opt)
    return timer.result()


def timer_in_a_subgroup(steps=3):
    """Ranks 0 and 1 train a DDP model over a group of their own while rank 2
    trains nothing: the timer's clock and hook follow the model's group.
    Rank 2 then tries to time that group and is refused."""
    sub = dist.new_group([0, 1])   # a collective of every rank, members or not
    if dist.get_rank() == 2:
        try:
            StepTimer(None, group=sub)
        except ValueError as exc:
            return {"refused": str(exc)}
        return {"refused": None}
    torch.manual_seed(0)
    ddp = wrap_ddp(mlp(32, 2, 16), torch.device("cpu"), process_group=sub)
    timer = StepTimer(ddp, batch_size=4)   # mode "full" on CPUs: the hook must sum over `sub`
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for _ in timer.data(range(steps)):
        with timer.phase("forward"):
            loss = ddp(torch.randn(4, 16)).square().mean()
        timer.finish_step(loss, opt)
    out = timer.result()
    out["first_param"] = [float(x) for x in next(ddp.parameters()).flatten()[:4]]
    return out


def gather_from_a_script(bucket_cap_mb=0.01):
    """A script that owns its process group (as under torchrun): the timer's result of every rank
    brought to rank 0 with `gather`; the others get None."""
    from ddp_lessons import gather
    model = _small_ddp_mlp(bucket_cap_mb)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    timer = StepTimer(model, batch_size=8)
    for x in timer.data([torch.randn(8, 32) for _ in range(4)]):
        with timer.phase("forward"):
            loss = model(x).pow(2).mean()
        timer.finish_step(loss, opt)
    got = gather({"timer": timer.result(), "steps": 4})   # a worker's own key called "steps"
    return None if got is None else [list(got), dist.get_rank()]


def mid_step_fetch_and_buckets(steps=5):
    """A batch fetched in the middle of each step (timer.data_wait) and DDP's buckets' tensors."""
    import time
    model = _small_ddp_mlp(0.01)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    timer = StepTimer(model)
    x = torch.randn(8, 32)
    for _ in range(steps):
        with timer.phase("forward"):
            loss = model(x).pow(2).mean()
        with timer.data_wait():
            time.sleep(0.01)
            x = torch.randn(8, 32)
        timer.finish_step(loss, opt)
    return timer.result()
