"""Case 1's evaluation: accuracy as the post scores it, on one rank over the
whole test set (the post) or sharded over every rank with the counts summed
(distributed). Defined in notebook 02_case1_answer.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.utils.data import Sampler

from .. import runtime
from .data import VQAFeatureDataset
from .options import Options
from .parts import build_model, make_loader, to_device
from .synthetic import tiny_dataset


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


def evaluate_worker(options, data_root=None, distributed: bool = True) -> dict:
    """Worker: build the model of `options` (seeded, untrained) and evaluate it,
    on this rank's shard with the counts summed over ranks (`distributed`),
    or over the whole test set on every rank. Notebook 02_case1_answer
    compares the two."""
    o = options if isinstance(options, Options) else Options(**options)
    dev = runtime.device()
    testset = VQAFeatureDataset(data_root or tiny_dataset()["root"], "test")
    model = build_model(o, testset.num_answers, testset.image_size, dev)
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    loader = make_loader(o.replace(num_workers=0), testset, o.batch_size,
                     ShardSampler(len(testset), rank, world), 0, dev.type == "cuda")
    return evaluate(model, loader, dev, distributed=distributed, amp=o.amp)
