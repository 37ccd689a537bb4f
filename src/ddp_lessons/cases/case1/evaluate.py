"""Case 1's evaluation: accuracy as the post scores it, on one rank over the
whole test set (the post) or sharded over every rank with the counts summed
(distributed). Defined in notebook 02_case1_answer.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.utils.data import Sampler

from .loop import to_device


class ShardSampler(Sampler):
    """Indices rank, rank + world, ...: every sample on exactly one rank, no padding
    (DistributedSampler pads with repeats, which would count some samples twice)."""

    def __init__(self, n: int, rank: int, world: int):
        self.indices = list(range(rank, n, world))

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return len(self.indices)


@torch.no_grad()
def evaluate(model, loader, dev, distributed: bool = False, amp: bool = False) -> dict:
    """Overall / open / closed accuracy (argmax vs the top label), as the post scores it.

    `distributed=True`: every rank scores its own shard and the counts are
    summed over ranks, so every rank returns the whole test set's result.
    """
    model.eval()
    counts = torch.zeros(4, dtype=torch.long, device=dev)  # open n, open right, closed n, closed right
    for batch in loader:
        targets = to_device(batch, dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            logits = model(batch)
        right = (logits.argmax(1) == targets.argmax(1)).long()
        closed = torch.tensor([t == "CLOSED" for t in batch["answer_types"]], device=dev)
        counts += torch.stack([(~closed).sum(), (right * ~closed).sum(), closed.sum(), (right * closed).sum()])
    if distributed:
        dist.all_reduce(counts)
    on, oc, cn, cc = counts.tolist()
    return {"overall": (oc + cc) / max(1, on + cn), "open": oc / max(1, on),
            "closed": cc / max(1, cn), "n": on + cn, "counts": [on, oc, cn, cc]}


def always_answer_most_frequent(model, trainset) -> int:
    """Make `model` answer every question with the training split's most
    frequent top answer (its VQA head's last layer: weights 0, bias one-hot):
    a deterministic fixture that gets some questions right and some wrong.
    Returns that answer's index."""
    counts = torch.zeros(trainset.num_answers)
    for e in trainset.entries:
        counts[e["labels"][max(range(len(e["scores"])), key=e["scores"].__getitem__)]] += 1
    top = int(counts.argmax())
    last = model.vqa_head[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()
        last.bias[top] = 1.0
    return top


SAMPLERS = ("shard", "padded")
