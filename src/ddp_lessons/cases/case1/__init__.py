"""Case 1 (notebooks 01-03): a plain-PyTorch DDP script slower on 2 GPUs than on one.

Rebuilt on one code path:

options (what the post, the answer and the fix set) -> plan (the options
turned into a rank's objects once: model, sampler, loader, evaluator) ->
loop (what the loop calls each step: loss sum, log, epoch edges) -> train
(the workers: epochs over the plan; `evaluate_worker`) ; evaluate ;
readout (reading what the workers return) ; scaling (1 worker against 2) ;
gap (the modelled 133 s against 105 s) ; buckets (the order gradients become
ready) ; verdicts (each conclusion of 01-03 decided by the numbers) ; replay
(a recorded GPU run made again here) ; ablation (the answer's fixes alone and
together) ; posted (the post's lines without a launcher) ; model, synthetic,
data (the M3AE-shaped stand-in and its dataset) ; exercises ; cli.
"""

from .data import VQAFeatureDataset
from .evaluate import evaluate
from .options import Options, parse_override
from . import scaling
from .posted import run_without_launcher
from .replay import rerun
from .readout import by_run, epoch_span, per_rank, throughput
from .synthetic import TINY_DATA, make_vqa_dataset, tiny_dataset
from .train import evaluate_worker, train, train_many

__all__ = ["Options", "parse_override", "train", "train_many", "evaluate", "evaluate_worker",
           "TINY_DATA", "tiny_dataset", "VQAFeatureDataset", "make_vqa_dataset",
           "by_run", "epoch_span", "per_rank", "throughput",
           "run_without_launcher", "rerun", "scaling"]
