"""Case 1 (notebooks 01-03): a plain-PyTorch DDP script slower on 2 GPUs than on one.

The skeleton: options (what the post, the answer and the fix set) -> plan (the options turned into a
rank's objects once: model, sampler, loader, evaluator) -> train (the worker and one step; a recorded
GPU run made again) ; readout (per-rank rows, the split, the recorded rounds with their provenance) ;
claims (the few verdicts that can go either way) ; exercises ; cli. Its own: loop (what the loop
calls each step), evaluate, scaling (1 worker against 2, one batch against another), buckets (the
order gradients become ready), gap (the modelled 133 s against 105 s), ablation (the answer's fixes
alone and together), posted (the post's lines without a launcher), model, synthetic, data (the
M3AE-shaped stand-in and its dataset). A notebook imports this package; `case1.plots` is the tool's
figures, loaded on first use.
"""

from . import ablation, buckets, gap, loop, model, plan, readout, scaling
from .claims import CLAIMS
from .data import VQAFeatureDataset
from .evaluate import evaluate
from .options import Options, parse_override
from .posted import run_without_launcher
from .readout import by_run, per_rank
from .synthetic import TINY_DATA, make_vqa_dataset, tiny_dataset
from .train import evaluate_worker, history_kept, recorded, remake, train, train_many, train_step
from ...tool.ddp import gradient_bytes

from ...course.contract import Case

CASE = Case("case1", "a plain-PyTorch DDP script slower on 2 GPUs than on one",
            ("01_case1_broken", "02_case1_answer", "03_case1_beyond"),
            commands={"case1": "ddp_lessons.cases.case1.cli:cli_command",
                      "make-vqa-data": "ddp_lessons.cases.case1.synthetic:cli_command"})

__all__ = ["CASE", "CLAIMS", "Options", "parse_override", "train", "train_many", "train_step", "evaluate",
           "evaluate_worker", "history_kept", "recorded", "remake", "TINY_DATA", "tiny_dataset",
           "VQAFeatureDataset", "make_vqa_dataset", "by_run", "per_rank", "run_without_launcher",
           "gradient_bytes", "ablation", "buckets", "gap", "loop", "model", "plan", "readout", "scaling"]


def __getattr__(name):
    # the tool's figures: matplotlib is loaded when a notebook asks, not in every worker process
    if name == "plots":
        from ...tool import plots
        return plots
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
