"""Case 1 (notebooks 01-03): a plain-PyTorch DDP script on 2 GPUs that is
slower than on one, rebuilt on one code path.

options (what the post, the answer and the fix set) -> parts (model, sampler,
loader, schedule, loss accumulator, log, epoch edges: each switched by one
option) -> setup (the options turned into those objects once: a Plan) ->
train (the worker: epochs over the plan, reading no option) ; evaluate ;
results (reading what the workers return) ; scaling (1 worker against 2 in
interleaved rounds) ; claims, claims_gpu, gap,
buckets (each conclusion of notebooks 01-03 as a verdict on the run's
numbers, the recorded GPU rounds, the modelled 133 s against 105 s, the
order gradients become ready) ; replay
(a recorded GPU run made again on this machine's GPUs: `rerun`) ; ablation (the answer's fixes
alone and together) ; posted (the post's lines without a launcher) ; model,
synthetic and data (the M3AE-shaped stand-in, the VQA-RAD-shaped dataset
written to disk, its reader) ; exercises ; cli.
"""

from .data import VQAFeatureDataset
from .evaluate import evaluate
from .options import Options, parse_override
from . import scaling
from .posted import run_without_launcher
from .replay import rerun
from .readout import allreduce_time, by_run, epoch_span, per_rank, throughput
from .synthetic import TINY_DATA, make_vqa_dataset, tiny_dataset
from .train import evaluate_worker, train, train_many

__all__ = ["Options", "parse_override", "train", "train_many", "evaluate", "evaluate_worker",
           "TINY_DATA", "tiny_dataset", "VQAFeatureDataset", "make_vqa_dataset",
           "allreduce_time", "by_run", "epoch_span", "per_rank", "throughput",
           "run_without_launcher", "rerun", "scaling"]
