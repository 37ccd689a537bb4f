"""A workload with known causes planted in it, for checking `diagnose` through the public API only.

A small decoder-style language model whose 32k x 128 token embedding is tied to the output layer (so
its gradient is ready last, in a bucket of its own), trained with gradient accumulation over 4
micro-steps without `no_sync`, rank 0 saving a checkpoint, and rank 1's sequences 1.5x as long as rank
0's. `planted(variant)` is the worker; each variant but "all" removes one cause (`VARIANTS`).
benchmarks/planted_causes.py runs them in interleaved rounds and records what `diagnose` named.
"""

from __future__ import annotations

import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn

from ddp_lessons.tool import runtime
from ddp_lessons.tool.ddp import wrap_ddp
from ddp_lessons.tool.timing import StepTimer

VOCAB, WIDTH, MICRO, BATCH, SEQ = 32_000, 128, 4, 1, 32
# variant -> the cause it removes (None: every cause planted)
VARIANTS = {"all": None, "no_sync": "allreduce_every_micro_step", "even": "waiting_for_slower_rank",
            "no_save": "outside_steps"}


class TiedLM(nn.Module):
    """Embedding -> 2 residual MLP blocks -> LayerNorm -> logits through the embedding's own weight."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))
                                    for _ in range(2))
        self.norm = nn.LayerNorm(WIDTH)

    def forward(self, tokens):
        h = self.emb(tokens)
        for b in self.blocks:
            h = h + b(h)
        return self.norm(h) @ self.emb.weight.t()   # tied: the embedding's gradient has two sources


def planted(variant: str = "all", optimizer_steps: int = 6) -> dict:
    """One rank's run of `variant` (a key of VARIANTS); returns its timer result."""
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r}: use one of {list(VARIANTS)}")
    rank, dev = dist.get_rank(), runtime.device()
    torch.manual_seed(0)
    ddp = wrap_ddp(TiedLM().to(dev), dev)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    seq = SEQ * 3 // 2 if rank == 1 and variant != "even" else SEQ   # rank 1's samples are longer
    g = torch.Generator().manual_seed(rank)
    timer = StepTimer(ddp, batch_size=BATCH)
    with tempfile.TemporaryDirectory(prefix="ddp-lessons-planted-") as tmp:
        for k in range(optimizer_steps * MICRO):
            tokens = torch.randint(0, VOCAB, (BATCH, seq + 1), generator=g).to(dev)
            last = k % MICRO == MICRO - 1
            sync = ddp.no_sync() if variant == "no_sync" and not last else _nothing()
            with sync:
                with timer.phase("forward"):
                    logits = ddp(tokens[:, :-1])
                    loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
                with timer.phase("backward"):
                    (loss / MICRO).backward()
            if last:
                with timer.phase("optimizer"):
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            timer.step_done()   # every micro-step is a step: the timer tells them by their optimizer phase
            if last and rank == 0 and variant != "no_save":
                with timer.outside("checkpoint"):
                    torch.save(ddp.module.state_dict(), os.path.join(tmp, "ckpt.pt"))
        return timer.result()


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
