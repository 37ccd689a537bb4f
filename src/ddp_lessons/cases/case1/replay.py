"""Case 1's recorded GPU runs, made again on this machine's GPUs.

`replay.stored_or_live(name, rerun, where)` calls `rerun` where `where`
runs on NCCL: the training run the record describes (its options, epochs and
the M3AE-size dataset at 224 px, as the record's `python -m ddp_lessons case1
--model m3ae ...` run made it), on `where`'s ranks. Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

from ...tool import records
from ...tool.paths import DATA_DIR
from ...tool.launcher import launch
from .data import make_vqa_dataset
from .readout import per_rank
from .train import train

GPU_IMAGE_SIZE = 224  # the recorded runs' images: M3AE's input size


def gpu_dataset() -> dict:
    """Make (once) the VQA-RAD-size dataset at 224 px the GPU runs read, in data/."""
    return make_vqa_dataset(DATA_DIR / f"vqa_rad_{GPU_IMAGE_SIZE}", image_size=GPU_IMAGE_SIZE)


def rerun(rec: dict, where) -> dict:
    """A new record of the case-1 run `rec` describes, made on `where`'s ranks."""
    if rec["kind"] != "case1":
        raise ValueError(f"case1.rerun reruns 'case1' records, not {rec['kind']!r}")
    c = rec["config"]
    # Records made before options were checked wrote "--set evaluation=none" as None.
    options = {k: ("none" if k == "evaluation" and v is None else v) for k, v in c["options"].items()}
    root = str(gpu_dataset()["root"])
    out = launch(train, (options, root, c["epochs"]), world_size=where.world_size,
                 backend=where.backend, timeout=900)
    config = dict(c, data_root=root, world_size=where.world_size)
    return records.make_record("case1", config, {"ranks": out, "per_rank": per_rank(out)},
                               backend=where.backend)
