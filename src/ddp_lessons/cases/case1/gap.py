"""A labelled model of the post's gap, 105 s per epoch on one RTX 3090 and
133 s on two: can the all-reduce alone explain it? Defined in notebook
03_case1_beyond.

`table` gives one `row` per batch size and link; `explains` says which reading a row supports. The
model's assumptions (each a column of the sensitivity table, not a fact) are stated in `row`.
"""

from __future__ import annotations

import math
import time

from ...tool import allreduce

POST = {"one_gpu_s": 105.0, "two_gpu_s": 133.0}
# Effective busbw of the link (GB/s): PCIe 4.0 x16 is ~32 GB/s nominal per direction,
# PCIe 3.0 x16 ~16, x8 ~8, x4 (or a chipset slot) ~4; ~75% effective, copies via host memory.
LINKS = {"PCIe 4.0 x16 (~24 GB/s)": 24e9, "PCIe 3.0 x16 (~12 GB/s)": 12e9,
         "PCIe 3.0 x8 (~6 GB/s)": 6e9, "PCIe x4 / chipset (~3 GB/s)": 3e9}


def row(batch: int, busbw: float, n_train: int, grad_bytes: int, backward_share: float,
        latency: float = 50e-6, post: dict = POST) -> dict:
    """One row of the model: per-step times (s) and the modelled two-GPU epoch
    without overlap (`epoch2_none`) and with the best overlap (`epoch2_best`).
    Assumptions (each a column of the sensitivity table, not a fact) at the lines they set."""
    steps1, steps2 = math.ceil(n_train / batch), math.ceil(n_train / (2 * batch))
    # one GPU's step takes T1 = 105 s / steps per epoch at the (unknown) batch size, data loading included,
    # and a step on each of two GPUs takes the same compute (each rank keeps the per-rank batch, as posted)
    t1 = post["one_gpu_s"] / steps1
    # the all-reduce of the gradients (the posted model keeps its unused heads): latency + bytes x 2(n-1)/n
    # / busbw, busbw the effective rate of the link NCCL uses (no P2P on GeForce: copies through host memory)
    comm = allreduce.estimate(grad_bytes, busbw, latency, world=2)
    # exposed communication lies between none of it overlapped (all added to the step) and as much as the
    # backward pass can hide; the backward share comes from a recorded GPU step. Overlap is not free on a
    # GPU either: NCCL's collectives are kernels on the same SMs, so the hidden part still slows compute;
    # this lower bound is optimistic.
    exposed_best = max(0.0, comm - backward_share * t1)
    return {"batch": batch, "busbw": busbw, "steps1": steps1, "steps2": steps2, "t1": t1, "comm": comm,
            "epoch2_none": steps2 * (t1 + comm), "epoch2_best": steps2 * (t1 + exposed_best)}


def table(n_train: int, grad_bytes: int, backward_share: float, batches=(8, 16, 32), links=LINKS) -> list[dict]:
    """The sensitivity table: one `row` per batch size and link, with its link name.
    Defined in notebook 03_case1_beyond."""
    return [dict(row(b, bw, n_train, grad_bytes, backward_share), link=name)
            for b in batches for name, bw in links.items()]


def explains(r: dict, post: dict = POST) -> str:
    """Which reading a row supports: communication alone reaches the two-GPU
    epoch even with the best overlap, only without overlap, or not at all. Defined in notebook 03_case1_beyond."""
    if r["epoch2_best"] >= post["two_gpu_s"]:
        return "explains it, even overlapped"
    if r["epoch2_none"] >= post["two_gpu_s"]:
        return "explains it only if nothing overlaps"
    return "does not explain it"


def decode_seconds(paths, repeats: int = 5) -> float:
    """Seconds to open, decode, convert to RGB and turn one JPEG into a float
    tensor (what a loader worker does per image): per image the best of
    `repeats` (the first, warm-up, left out), then the median over `paths`. Defined in notebook 03_case1_beyond."""
    import statistics

    import numpy as np
    import torch
    from PIL import Image

    def once(p):
        t0 = time.perf_counter()
        with Image.open(p) as im:
            torch.from_numpy(np.array(im.convert("RGB"))).permute(2, 0, 1).float().div_(255)
        return time.perf_counter() - t0
    return statistics.median(min([once(p) for _ in range(repeats + 1)][1:]) for p in paths)
