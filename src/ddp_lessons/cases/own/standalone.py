"""A plain DDP training script with two of the workload's habits, as a practitioner writes one: it never
imports ddp_lessons. Every rank evaluates the whole test set after each epoch, and rank 0 calls
`loss.item()` and prints every step. Run it under torchrun (gloo on CPUs, NCCL on GPUs) or as one process;
`copy_to(folder)` puts it where a notebook runs it from (the doctor's patient in notebook 07).
"""

import os
import shutil
from pathlib import Path


def copy_to(folder) -> str:
    """This script copied into `folder` (its own folder holds the package's modules, which would shadow
    the standard library's on the script's path); returns the copy's path.
    Defined in notebook 07_diagnose_your_own_run."""
    return str(shutil.copy(__file__, Path(folder) / "train.py"))


def placement() -> tuple[str, str]:
    """(backend, device) of this rank: a GPU per rank with NCCL, or CPUs with gloo where this host has fewer
    GPUs than ranks (2 ranks on a one-GPU box). Defined in notebook 07_diagnose_your_own_run."""
    import torch
    ranks, local = int(os.environ.get("LOCAL_WORLD_SIZE", 1)), os.environ.get("LOCAL_RANK", "0")
    if torch.cuda.is_available() and torch.cuda.device_count() >= ranks:
        return "nccl", f"cuda:{local}"
    return "gloo", "cpu"


def main(epochs: int = 5, train_size: int = 128, test_size: int = 1024, batch: int = 16) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.nn  # noqa: F401 - before the process group: imported later (by DDP), gloo's
    from torch import nn         # threads can abort the process at exit now and then
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    ddp = "RANK" in os.environ
    backend, device = placement()
    if ddp:
        dist.init_process_group(backend)
    rank = dist.get_rank() if ddp else 0
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)   # without it every rank would make a CUDA context on GPU 0
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1),
                          nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    model = model.to(dev)
    net = nn.parallel.DistributedDataParallel(model) if ddp else model
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    data = TensorDataset(torch.randn(train_size, 3, 32, 32), torch.randint(0, 10, (train_size,)))
    sampler = DistributedSampler(data) if ddp else None
    loader = DataLoader(data, batch_size=batch, sampler=sampler, shuffle=not ddp)
    test = TensorDataset(torch.randn(test_size, 3, 32, 32), torch.randint(0, 10, (test_size,)))
    for epoch in range(epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            loss = nn.functional.cross_entropy(net(x.to(dev)), y.to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0:   # the habit: a host sync and a print every step
                print(f"epoch {epoch} step {step} loss {loss.item():.3f}", flush=True)
        # the habit: every rank evaluates the whole test set (the fix: a DistributedSampler, counts all-reduced)
        net.eval()
        with torch.no_grad():
            correct = sum(int((net(x.to(dev)).argmax(1) == y.to(dev)).sum())
                          for x, y in DataLoader(test, batch_size=128))
        net.train()
        if rank == 0:
            print(f"epoch {epoch} accuracy {correct / test_size:.3f}", flush=True)
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
