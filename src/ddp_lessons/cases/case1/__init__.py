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

from ...course.contract import Case

CASE = Case("case1", "a plain-PyTorch DDP script slower on 2 GPUs than on one",
            ("01_case1_broken", "02_case1_answer", "03_case1_beyond"), options=Options,
            worker="ddp_lessons.cases.case1.train:train", claims="ddp_lessons.cases.case1.verdicts",
            exercises="ddp_lessons.cases.case1.exercises",
            commands={"case1": "ddp_lessons.cases.case1.cli:cli_command",
                      "make-vqa-data": "ddp_lessons.cases.case1.synthetic:cli_command"})

__all__ = ["CASE", "Options", "parse_override", "train", "train_many", "evaluate", "evaluate_worker",
           "TINY_DATA", "tiny_dataset", "VQAFeatureDataset", "make_vqa_dataset",
           "by_run", "epoch_span", "per_rank", "throughput",
           "run_without_launcher", "rerun", "scaling"]
