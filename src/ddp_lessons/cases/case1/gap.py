"""A labelled model of the post's gap, 105 s per epoch on one RTX 3090 and 133 s on two. Defined in
notebook 03_case1_beyond.

`at_batch` adds up, per per-rank batch, the causes the course found (the recorded bucket timeline replayed
over a link, the buffer broadcast, rank 0's evaluation on rank 1's clock) into `epochs` of the `COMBOS`;
`batch_window` narrows the batch by the recorded compute and memory; `lines` prints it;
`decode_seconds` times a loader's per-image work.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

from ...tool.predict import resolve, whatif

POST = {"one_gpu_s": 105.0, "two_gpu_s": 133.0}


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


# -- the post's gap answered in numbers: one model, its inputs from records (notebook 03) ---------------
# The combinations of causes the model adds up, in the order the table prints them.
COMBOS = ("data split in two, nothing else", "+ all-reduce exposed after the backward",
          "+ buffer broadcast every forward", "+ rank 0's evaluation on rank 1's clock",
          "every rank all samples (+ all above)")
GIB = 2**30


def epochs(n_train: int, batch: int, exposed: float, broadcast: float, evaluation: float,
           post: dict = POST) -> dict:
    """Modelled two-GPU epoch (s) for each combination in `COMBOS`, at one per-rank batch.
    `exposed`, `broadcast`: s per step; `evaluation`: s once per epoch. Defined in notebook 03_case1_beyond."""
    steps1, steps2 = math.ceil(n_train / batch), math.ceil(n_train / (2 * batch))
    t1 = post_step(n_train, batch, post)  # the one-GPU step, all of it (loader included), from the post's 105 s
    step2 = t1 + exposed + broadcast  # the per-rank batch kept, as posted: same work per step, plus the link
    return dict(zip(COMBOS, (steps2 * t1, steps2 * (t1 + exposed), steps2 * step2,
                             steps2 * step2 + evaluation, steps1 * step2 + evaluation), strict=True))


def batch_window(n_train: int, factor: float, rec: dict, capacity: float = 24 * GIB,
                 post: dict = POST) -> tuple[int, int]:
    """(smallest, largest) per-rank batch the recorded run `rec` (`inputs`) allows on the post's GPU, that
    GPU `factor` x slower per sample. Smallest: a step's GPU work, factor x (optimizer + batch x (forward +
    backward)), fits in the post's step, 105 s / steps (linear in the batch: a small batch uses a GPU worse,
    so a lower bound). Largest: the fixed memory + batch x the recorded activations per sample fit in
    `capacity` (24 GiB on an RTX 3090). Defined in notebook 03_case1_beyond."""
    room = post["one_gpu_s"] / n_train - factor * (rec["forward"] + rec["backward"])  # s per sample left
    smallest = max(1, math.ceil(factor * rec["optimizer"] / room)) if room > 0 else math.inf
    activations = (rec["peak_bytes"] - rec["fixed_bytes"]) / rec["batch"]
    return smallest, int((capacity - rec["fixed_bytes"]) // activations)


def lines(columns: dict, smallest: float = 1, combos=COMBOS, label=None, post: dict = POST) -> list[str]:
    """The model as text: one line per combination, one column per batch (`at_batch` results by batch);
    `*` where it reaches the post's two-GPU epoch, `-` below the smallest batch. Defined in notebook 03_case1_beyond."""
    out = [f"{'per-rank batch':44s}" + "".join(f"{b:>7d}" for b in columns)] if label is None else []
    for combo in combos:
        cells = ["      -" if b < smallest else
                 f"{c['epochs'][combo]:6.0f}{'*' if c['epochs'][combo] >= post['two_gpu_s'] else ' '}"
                 for b, c in columns.items()]
        out.append(f"{(label or combo):44s}" + "".join(cells))
    return out


def post_step(n_train: int, batch: int, post: dict = POST) -> float:
    """The post's one-GPU step (s) at a per-rank batch: 105 s / steps per epoch."""
    return post["one_gpu_s"] / math.ceil(n_train / batch)


def inputs(record: dict) -> dict:
    """What the model reads from a recorded run (a `records.load` result): per-sample forward and backward,
    per-step optimizer (s), its batch, gradient bytes, peak and fixed memory. Defined in notebook 03_case1_beyond."""
    pr, rank = record["results"]["per_rank"][0], record["results"]["ranks"][0]
    b = pr["batch_size"]
    return {"batch": b, "forward": pr["forward"] / b, "backward": pr["backward"] / b,
            "optimizer": pr["optimizer"], "grad_bytes": pr["grad_bytes"], "peak_bytes": rank["max_memory_bytes"],
            # memory that does not grow with the batch: parameters, gradients, Adam's two moments, and DDP's
            # buckets (a copy of the gradients with gradient_as_bucket_view=False, as posted): 5 x the bytes
            "fixed_bytes": 5 * pr["grad_bytes"]}


def at_batch(record: dict, batch: int, link, factor: float, n_train: int, n_test: int,
             buffer_bytes: int, bandwidth_factor: float = 1.0) -> dict:
    """One column of the model: the causes' seconds at one per-rank batch over one link (a name of
    `predict.LINKS`), the post's GPU `factor` x slower than the recorded one, and `epochs` of them.
    Defined in notebook 03_case1_beyond."""
    rec = inputs(record)
    link = resolve(link)
    link = replace(link, bus_bandwidth=link.bus_bandwidth * bandwidth_factor)
    # the recorded bucket timeline stretched to this batch on the post's GPU: each bucket becomes ready
    # factor x batch / recorded batch later (backward time per sample, scaled alike for every layer)
    exposed = whatif(record, link, 2, compute_factor=factor * batch / rec["batch"]).median("exposed")
    broadcast = link.allreduce_time(buffer_bytes, 2)  # one small collective, no more than an all-reduce of its bytes
    evaluation = factor * n_test * rec["forward"]  # rank 0 alone, the whole test set, forward only
    return {"batch": batch, "t1": post_step(n_train, batch), "exposed": exposed, "broadcast": broadcast,
            "evaluation": evaluation, "epochs": epochs(n_train, batch, exposed, broadcast, evaluation)}
