"""Case 1 (notebooks 01-03): a plain-PyTorch DDP script on 2 GPUs that is
slower than on one, rebuilt on one code path.

options (what the post, the answer and the fix set) -> setup (options turned
into the model, sampler, loader, schedule) -> train (the worker) ->
evaluate ; results (reading what the workers return) ; ablation (the
answer's fixes alone and together) ; posted (the post's lines without a
launcher) ; replay (a recorded GPU run made again on this machine's
GPUs: `rerun`) ; model and data (the M3AE-shaped stand-in and a VQA-RAD-shaped
dataset) ; exercises ; cli.
"""

from .data import TINY_DATA, VQAFeatureDataset, make_vqa_dataset, tiny_dataset
from .evaluate import evaluate, evaluate_worker
from .options import Options, parse_override
from .posted import run_without_launcher
from .replay import rerun
from .results import allreduce_time, by_run, epoch_span, per_rank, throughput, waited
from .train import train, train_many

__all__ = ["Options", "parse_override", "train", "train_many", "evaluate", "evaluate_worker",
           "TINY_DATA", "tiny_dataset", "VQAFeatureDataset", "make_vqa_dataset",
           "allreduce_time", "by_run", "epoch_span", "per_rank", "throughput", "waited",
           "run_without_launcher", "rerun"]
