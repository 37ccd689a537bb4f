"""Case 2's real levers on one device: the posted step against the fastest
step one GPU can take, each a closure `step()` (`make_step`) timed in interleaved rounds (`time_steps`).

The levers are the keys of `LEVERS` (posted, fixed, fused, compiled, graphed, ddp), each described
there. Every lever trains the same MLP from the same seed on the same batches, made once on the device
(the loader is notebook 05's subject, not a lever here). Defined in notebook 06_case2_breakeven.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
import time
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from ....tool import spread
from ....tool.ddp import wrap_ddp
from ..model import D_IN, mlp

# posted: input (B, 1, 10); default Adam: foreach on CUDA; compiled: CUDA graphs inside, the loss and Adam
# stay eager; graphed: PyTorch's "whole network capture"; ddp: its built-in C++ all-reduce, for reference
LEVERS = {
    "posted": "the post's step: MSE of (B,1,1) against (B,1), broadcast to (B,B,1); Adam (default)",
    "fixed": "loss shape fixed (pred.squeeze(-1)); Adam (default)",
    "fused": "fixed + torch.optim.Adam(fused=True)",
    "compiled": "fixed + torch.compile(model, mode='reduce-overhead'); Adam (default)",
    "graphed": "fixed; forward, backward and Adam(capturable=True) in one CUDA graph, replayed",
    "ddp": "fixed under DDP at world size 1 (built-in all-reduce); Adam (default)",
}
CUDA_ONLY = {
    "compiled": "mode='reduce-overhead' is CUDA graphs; on a CPU it would time Inductor's C++ code, another lever",
    "graphed": "CUDA graphs need a CUDA device",
}
TIMING = ("CUDA events recorded before every step and after the last (one synchronize per round); "
          "step time = gap between consecutive events; on CPU, perf_counter between steps. "
          "wall_per_step: synchronize + perf_counter around the round's steps / steps")


@dataclass(frozen=True)
class Shapes:
    """What every lever trains (a record's "config"): the MLP's width and depth, the batch, Adam's lr, the seed."""
    width: int
    depth: int
    batch: int
    lr: float
    seed: int


class Skipped(RuntimeError):
    """A lever this device cannot run (recorded with its reason, not as an error)."""


def _loss(pred, y, posted: bool):
    # posted: (B,1,1) against (B,1) broadcasts to (B,B,1), as the post's MSELoss did
    return F.mse_loss(pred if posted else pred.squeeze(-1), y)


def make_batches(cfg: Shapes, dev: torch.device, n: int = 8) -> list:
    g, b = torch.Generator().manual_seed(cfg.seed), cfg.batch
    return [(torch.randn(b, 1, D_IN, generator=g).to(dev), torch.randn(b, 1, generator=g).to(dev)) for _ in range(n)]


def _model(cfg: Shapes, dev: torch.device):
    torch.manual_seed(cfg.seed)
    return mlp(cfg.width, cfg.depth).to(dev)


def _eager(model, opt, batches, posted=False):
    it = itertools.cycle(batches)

    def step():
        x, y = next(it)
        opt.zero_grad(set_to_none=True)
        _loss(model(x), y, posted).backward()
        opt.step()
    return step


def _graphed(cfg: Shapes, dev: torch.device, batches):
    """PyTorch's whole-network capture: static input and target, warm-up on a
    side stream, capture with the gradients set to None (backward then writes,
    not adds, them on every replay), replay after copying the next batch in."""
    model = _model(cfg, dev)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, capturable=True)
    sx, sy = batches[0][0].clone(), batches[0][1].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            _loss(model(sx), sy, False).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = _loss(model(sx), sy, False)
        static_loss.backward()
        opt.step()
    it = itertools.cycle(batches)

    def step():
        x, y = next(it)
        sx.copy_(x), sy.copy_(y)
        graph.replay()
    step.keep = (graph, model, opt, static_loss)  # the graph's memory lives as long as the step
    return step


def make_step(name: str, cfg: Shapes, dev: torch.device, batches):
    """The step closure of lever `name` (a key of LEVERS), built and ready to time."""
    if name in CUDA_ONLY and dev.type != "cuda":
        raise Skipped(CUDA_ONLY[name])
    if name == "graphed":
        return _graphed(cfg, dev, batches)
    model = _model(cfg, dev)
    if name == "compiled":
        model = torch.compile(model, mode="reduce-overhead")
    elif name == "ddp":
        model = wrap_ddp(model, dev)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, fused=True if name == "fused" else None)
    return _eager(model, opt, batches, posted=name == "posted")


@contextlib.contextmanager
def one_rank_group(dev: torch.device):
    """A process group of this process alone (NCCL on CUDA, gloo on CPU) through a FileStore
    (no listening socket), its sockets on loopback as the launcher's ranks'; the environment restored."""
    import torch.distributed as dist

    from ....tool.launcher.child import loopback_name
    if dist.is_initialized():
        yield
        return
    saved, lo = dict(os.environ), loopback_name()
    if lo:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", lo)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", lo)
    kw = {"device_id": dev} if dev.type == "cuda" else {}
    with tempfile.TemporaryDirectory(prefix="ddp_lessons-levers-") as tmp:
        try:
            dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", rank=0, world_size=1,
                                    store=dist.FileStore(os.path.join(tmp, "store"), 1), **kw)
            yield
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
            os.environ.clear()
            os.environ.update(saved)


def time_steps(step, steps: int, warmup: int, dev: torch.device) -> dict:
    """Run `warmup` untimed steps, then `steps` timed ones: spread.summary of the
    per-step times (s), every step time, and the wall time per step.

    A CUDA event recorded on the current stream before each step and after the last, one
    synchronize after the round; a step's time is the gap between consecutive events (on CPUs,
    `time.perf_counter` between steps). The gaps add up to the round's wall time, so a launch-bound
    step counts the GPU's wait for the host. The wall time per step (synchronize + perf_counter
    around all the round's steps, divided by the step count) is a cross-check."""
    cuda = dev.type == "cuda"
    for _ in range(warmup):
        step()
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)] if cuda else [0.0] * (steps + 1)
    if cuda:
        torch.cuda.synchronize(dev)  # note: CPU-GPU sync point, before the round's clock starts
    t0 = time.perf_counter()
    for i in range(steps):
        if cuda:
            marks[i].record()
        else:
            marks[i] = time.perf_counter()
        step()
    if cuda:
        marks[steps].record()
        torch.cuda.synchronize(dev)  # note: CPU-GPU sync point, once per round
        times = [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(marks)]
    else:
        marks[steps] = time.perf_counter()
        times = [b - a for a, b in itertools.pairwise(marks)]
    wall = time.perf_counter() - t0
    return {**spread.summary(times), "wall_per_step": wall / steps, "step_times": times}


def default_config() -> dict:
    """The posted shapes (`Options.posted()`), as a record's config: width, depth, batch, lr, seed (`Shapes`)."""
    from ..options import Options
    o = Options.posted()
    return {"width": o.width, "depth": o.depth, "batch": o.batch_size, "lr": o.lr, "seed": o.seed}


def medians(res: dict, name: str) -> list:
    """Per-round median step times (s) of lever `name`, None for a round it missed."""
    got = {r["round"]: r["median"] for r in res["levers"][name]["rounds"]}
    return [got.get(i) for i in range(res["rounds_done"])]
