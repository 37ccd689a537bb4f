"""A labelled model of the post's gap, 105 s per epoch on one RTX 3090 and 133 s on two, from recorded
one-GPU runs (not validated on two GPUs). Defined in notebook 03_case1_beyond.

Per per-rank batch, `column` takes the recorded run at that batch (or the nearest larger one, scaled
down: not floored), the 3090 `factor` x slower: its GPU work per step; the rest of the post's step
(105 s / steps) is what the model does not see (loader, host); the recorded buckets replayed through
a link give the all-reduce left exposed; `lines` prints the epochs; `link_rows` runs it over the links
a 2x RTX 3090 workstation may have (`no_p2p`: a link without peer-to-peer). `decode_seconds` times a
loader's per-image work.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from dataclasses import dataclass, replace

from ...tool.predict import Link, resolve, whatif
from ...tool.runs import Record, Run
from .readout import Result


@dataclass(frozen=True)
class Post:
    """The post's epochs (s): on one RTX 3090 and on two."""
    one_gpu_s: float
    two_gpu_s: float


POST = Post(one_gpu_s=105.0, two_gpu_s=133.0)
GIB = 2**30
CAPACITY = 24 * GIB   # an RTX 3090's memory
ROWS = ("data split in two, GPU work and the rest as on one GPU", "+ the all-reduce left exposed",
        "every rank all samples (+ the all-reduce)")
NOT_VALIDATED = "modelled from one-GPU records, not validated on multi-GPU"


def no_p2p(link) -> Link:
    """`link` (a name of `predict.LINKS`, or a Link) without peer-to-peer between the cards, common
    between GeForce cards (driver-dependent): NCCL stages every byte through host memory, so half the
    bus bandwidth and twice the step latency, the estimate `predict.LINKS["pcie4-x16-no-p2p"]` makes for
    PCIe 4.0 x16. Defined in notebook 03_case1_beyond."""
    link = resolve(link)
    return Link(f"{link.name}-no-p2p", link.bus_bandwidth / 2, link.step_latency * 2,
                f"{link.source}; halved: no peer-to-peer, NCCL stages through host memory (an estimate)")


# The second row of the model over other links and compute rates: {label: (link, factor multiplier)}.
# A lane of PCIe 4.0 carries what two of PCIe 3.0 do (16 and 8 GT/s), so a row names both slots of its
# bandwidth: PCIe 3.0 x8 (two cards at x8/x8 on a PCIe 3.0 board) is the x4 row.
LINK_ROWS = {
    "PCIe 4.0 x16, P2P": ("pcie4-x16", 1.0),
    "PCIe 4.0 x8 (x8/x8) or 3.0 x16, P2P": ("pcie4-x8", 1.0),
    "PCIe 4.0 x8 (x8/x8) or 3.0 x16, no P2P": (no_p2p("pcie3-x16"), 1.0),
    "PCIe 4.0 x4 (chipset slot) or 3.0 x8, P2P": ("pcie4-x4", 1.0),
    "PCIe 4.0 x4 (chipset slot) or 3.0 x8, no P2P": (no_p2p("pcie4-x4"), 1.0),
    "3090 computing 2x faster (x16, no P2P)": ("pcie4-x16-no-p2p", 0.5),
    "3090 computing 2x slower (x16, no P2P)": ("pcie4-x16-no-p2p", 2.0),
    "NVLink bridge": ("3090-nvlink-bridge", 1.0),
}
SLOW_LINK = "PCIe 4.0 x4 (chipset slot) or 3.0 x8, no P2P"   # the row that comes near 133 s at batch 8


def recorded_runs(*names) -> dict:
    """{per-rank batch: Run} from case-1 records: a `case1-*-batches` record (one run per batch, the
    round that kept its buckets) or a single run (`case1-h200-broken`). Defined in notebook 03_case1_beyond."""
    out = {}
    for name in names:
        rec = Record.load(name)
        for setup in rec.setups:
            run = rec.rounds(setup)[0]
            out.setdefault(Result.of(run[0]).batch_size, run)
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class Inputs:
    """What the model reads of a recorded run: its per-step medians (s) after the warm-up (forward,
    backward, optimizer), its per-rank batch, gradient bytes and peak memory (bytes, 0 where unrecorded)."""
    forward: float
    backward: float
    optimizer: float
    batch: int
    grad_bytes: int
    peak_bytes: int

    @classmethod
    def of(cls, run: Run, skip: int = 3) -> Inputs:
        steps, r = run[0].steps(skip), Result.of(run[0])
        forward, backward, optimizer = (statistics.median(getattr(s, k) for s in steps)
                                        for k in ("forward", "backward", "optimizer"))
        return cls(forward, backward, optimizer, r.batch_size, r.grad_bytes, r.max_memory_bytes or 0)


def inputs(run: Run, skip: int = 3) -> dict:
    """A recorded run's per-step medians (s) after `skip` warm-up steps: forward, backward, optimizer;
    its batch, gradient bytes and peak memory (`Inputs`, as a dict). Defined in notebook 03_case1_beyond."""
    return dataclasses.asdict(Inputs.of(run, skip))


def source(runs: dict, batch: int) -> int:
    """The recorded batch a column reads: `batch` itself, the smallest larger one (scaled down), or
    above every record the largest (scaled up)."""
    return next((b for b in runs if b >= batch), max(runs))


@dataclass(frozen=True)
class Column:
    """One per-rank batch of the model (`column`), seconds per step: `gpu` (forward + backward + optimizer on
    the 3090), `t1` (the post's one-GPU step), `rest` (t1 - gpu: what the model does not see), `exposed`,
    `broadcast`; the recorded batch it reads (`source`, `floored` where it is this batch), whether it `fits`
    24 GiB, and `epochs`: seconds per row of `ROWS`."""
    batch: int
    source: int
    floored: bool
    gpu: float
    t1: float
    rest: float
    exposed: float
    broadcast: float
    fits: bool
    epochs: dict


def column(runs: dict, batch: int, link, factor: float, n_train: int, buffer_bytes: int,
           bandwidth_factor: float = 1.0, post: Post = POST) -> Column:
    """One per-rank batch of the model over one link (a name of `predict.LINKS`), the 3090 `factor` x
    slower than the recorded GPU (a `Column`; below 0 s of `rest` the batch is ruled out).
    Defined in notebook 03_case1_beyond."""
    src = source(runs, batch)
    rec, scale = Inputs.of(runs[src]), batch / src
    # GPU work: the recorded batch's own step where recorded (floored: a small batch's backward still
    # reads every weight), else scaled linearly from another (down: too short, not floored; up: linear)
    gpu = factor * (scale * (rec.forward + rec.backward) + rec.optimizer)
    steps1, steps2 = math.ceil(n_train / batch), math.ceil(n_train / (2 * batch))
    t1 = post.one_gpu_s / steps1   # the post's one-GPU step, all of it: GPU work and the rest
    link = resolve(link)
    link = replace(link, bus_bandwidth=link.bus_bandwidth * bandwidth_factor)
    # the recorded buckets, each ready factor x scale later, through the link: the timeline's compute
    # is the GPU work above, so t1 and the overlap come from one assumption
    exposed = whatif(runs[src], link, 2, compute_factor=factor * scale, warmup=3).median("exposed")
    broadcast = link.allreduce_time(buffer_bytes, 2)  # RoBERTa's buffers before every forward
    step2 = t1 + exposed + broadcast  # the per-rank batch kept, as posted: the same step, plus the link
    peak = rec.grad_bytes * 5 + (rec.peak_bytes - 5 * rec.grad_bytes) * scale
    return Column(batch=batch, source=src, floored=src == batch, gpu=gpu, t1=t1, rest=t1 - gpu, exposed=exposed,
                  broadcast=broadcast, fits=peak <= CAPACITY,
                  epochs=dict(zip(ROWS, (steps2 * t1, steps2 * step2, steps1 * step2), strict=True)))


def table(runs: dict, batches, link="pcie4-x16-no-p2p", factor: float = 2.0, n_train: int = 3058,
          buffer_bytes: int = 8224, bandwidth_factor: float = 1.0) -> dict:
    """{batch: `Column`} over `batches`. Defined in notebook 03_case1_beyond."""
    return {b: column(runs, b, link, factor, n_train, buffer_bytes, bandwidth_factor) for b in batches}


def link_rows(runs: dict, batches, factor: float = 2.0, n_train: int = 3058, rows: dict = LINK_ROWS) -> dict:
    """{label: `table`} for every row of `rows` (default `LINK_ROWS`: PCIe 4.0 at x16, x8 and x4 and
    their PCIe 3.0 equals, with and without peer-to-peer, the compute rate halved and doubled, an
    NVLink bridge). Defined in notebook 03_case1_beyond."""
    return {label: table(runs, batches, link, factor * k, n_train) for label, (link, k) in rows.items()}


def needed_exposed(batch: int, n_train: int, post: Post = POST) -> float:
    """The all-reduce left exposed per step (s) that makes the split two-GPU epoch the post's 133 s,
    its per-rank batch kept: 133 s / steps per rank - the post's one-GPU step. No model in it: the
    post's figures and the split. Defined in notebook 03_case1_beyond."""
    return post.two_gpu_s / math.ceil(n_train / (2 * batch)) - post.one_gpu_s / math.ceil(n_train / batch)


def ruled_out(c: Column) -> bool:
    """A batch the post's 105 s cannot hold (the modelled GPU work alone is longer) or 24 GiB cannot."""
    return c.rest < 0 or not c.fits


def reaching(cols: dict, row: str = ROWS[1], post: Post = POST) -> list[int]:
    """The batches (not ruled out) whose `row` epoch reaches the post's two-GPU 133 s.
    Defined in notebook 03_case1_beyond."""
    return [b for b, c in cols.items() if not ruled_out(c) and c.epochs[row] >= post.two_gpu_s]


def lines(cols: dict, rows=ROWS, label=None, post: Post = POST) -> list[str]:
    """The model as text: one line per row, one column per batch; `*` where it reaches the post's
    two-GPU epoch, `-` where the batch is ruled out, `~` beside a batch scaled from a recorded one
    (down: not floored; up: linear). Defined in notebook 03_case1_beyond."""
    head = "".join(f"{b:>6d}{' ' if c.floored else '~'}" for b, c in cols.items())
    out = [f"{'per-rank batch':52s}{head}"] if label is None else []
    for row in rows:
        cells = ["      -" if ruled_out(c) else
                 f"{c.epochs[row]:6.0f}{'*' if c.epochs[row] >= post.two_gpu_s else ' '}"
                 for c in cols.values()]
        out.append(f"{(label or row):52s}" + "".join(cells))
    return out


def decode_seconds(paths, repeats: int = 5) -> float:
    """Seconds to open, decode, convert to RGB and turn one JPEG into a float
    tensor (what a loader worker does per image): per image the best of
    `repeats` (the first, warm-up, left out), then the median over `paths`. Defined in notebook 03_case1_beyond."""
    import numpy as np
    import torch
    from PIL import Image

    def once(p):
        t0 = time.perf_counter()
        with Image.open(p) as im:
            torch.from_numpy(np.array(im.convert("RGB"))).permute(2, 0, 1).float().div_(255)
        return time.perf_counter() - t0
    return statistics.median(min([once(p) for _ in range(repeats + 1)][1:]) for p in paths)
