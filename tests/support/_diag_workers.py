"""Workers for tests/tool/test_diagnose.py (spawned children import this module by name)."""

import time

import torch
import torch.distributed as dist
from torch import nn

from ddp_lessons.course.toy import mlp
from ddp_lessons.tool.ddp import wrap_ddp
from ddp_lessons.tool.timing import StepTimer


def sleepy(steps=5, epochs=2, before=0.1, work=0.02, slower=0.03, eval_s=0.2, gap=0.01):
    """Known sleeps: `before` the first step, `work` in each forward (rank 1
    `slower` more, so rank 0 waits for it), `gap` untimed after each step,
    `eval_s` outside the steps after each epoch. Returns the timer's result
    and the wall time the worker measured itself around the same window."""
    torch.manual_seed(0)
    model = wrap_ddp(mlp(16, 1), torch.device("cpu"))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    timer = StepTimer(model, batch_size=8)
    t0 = time.perf_counter()
    time.sleep(before)
    data = [torch.randn(8, 32) for _ in range(steps)]
    for _ in range(epochs):
        for x in timer.data(data):
            with timer.phase("forward"):
                time.sleep(work + slower * dist.get_rank())
                loss = model(x).pow(2).mean()
            timer.finish_step(loss, opt)
            time.sleep(gap)
        with timer.outside("eval"):
            time.sleep(eval_s)
    wall = time.perf_counter() - t0
    return {"timer": timer.result(), "wall": wall}


def duplicated_eval(epochs=3, steps=15, batch=32, test_size=30000, width=512):
    """A tiny classifier trained on this rank's share of the data, where every
    rank evaluates the whole test set between epochs (the habit to find)."""
    g = torch.Generator().manual_seed(0)
    n = steps * batch * dist.get_world_size()
    x, y = torch.randn(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g)
    xt = torch.randn(test_size, 64, generator=g)
    model = wrap_ddp(nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                   nn.Linear(width, 10)), torch.device("cpu"))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    timer = StepTimer(model, batch_size=batch)
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = [(x[i:i + batch], y[i:i + batch]) for i in range(rank * batch, len(x), world * batch)]
    for _ in range(epochs):
        for xb, yb in timer.data(mine):
            with timer.phase("forward"):
                loss = nn.functional.cross_entropy(model(xb), yb)
            timer.finish_step(loss, opt)
        with timer.outside("eval"), torch.no_grad():  # every rank: the whole test set
            for i in range(0, test_size, 256):
                model.module(xt[i:i + 256]).argmax(1)
    return timer.result()


def accumulating(no_sync: bool, k=4, optimizer_steps=6, width=512, batch=8, optimizer_apart=False):
    """Gradient accumulation, each micro-step timed as a step: k micro-steps per optimizer step,
    the first k-1 inside `no_sync()` or not. `optimizer_apart`: every micro-step closed first, the
    optimizer timed after it (a layout the timer must read as the same step). Returns the timer's result."""
    import contextlib
    torch.manual_seed(0)
    model = wrap_ddp(mlp(width, 3), torch.device("cpu"))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    timer = StepTimer(model, batch_size=batch)
    data = [torch.randn(batch, 32) for _ in range(k * optimizer_steps)]
    for i, x in enumerate(timer.data(data)):
        last = i % k == k - 1
        with model.no_sync() if no_sync and not last else contextlib.nullcontext():
            with timer.phase("forward"):
                loss = model(x).pow(2).mean() / k
            with timer.phase("backward"):
                loss.backward()
        if optimizer_apart:
            timer.step_done()
        if last:
            with timer.phase("optimizer"):
                opt.step()
                opt.zero_grad()
        if not optimizer_apart or last:
            timer.step_done()
    return {"timer": timer.result()}
