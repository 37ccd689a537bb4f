"""Case 1's verdicts, each decided by the numbers a notebook measured.

runs (01-03: the CPU runs the notebooks make) ; gpu (02-03: the recorded H200
pairs, `data/runs/case1-h200-pairs.json`) ; model (03: the gap model and the
bucket order). A notebook calls them as `verdicts.NAME`.
"""

from .runs import (split_disjoint, two_workers_not_twice_as_fast, eval_wait, epoch_boundary, same_counts,
                   order_repeats, epoch_longer_halved, bytes_change_only_with, raises, core_overbooked,
                   distributed_count_equal, scaling_below, diagnosis_sees_evaluation,
                   diagnosis_shares_evaluation)
from .gpu import (machine_line, round_medians, pair, unsteady, data_wait_share, loader_keeps_up, iqr_rels,
                  stays_unsteady)
from .model import comm_can_explain, comm_explains_everywhere, late_tensor_exposed, calls_match

__all__ = ["split_disjoint", "two_workers_not_twice_as_fast", "eval_wait", "epoch_boundary", "same_counts",
           "order_repeats", "epoch_longer_halved", "bytes_change_only_with", "raises", "core_overbooked",
           "distributed_count_equal", "scaling_below", "diagnosis_sees_evaluation", "diagnosis_shares_evaluation",
           "machine_line", "round_medians", "pair", "unsteady", "data_wait_share", "loader_keeps_up", "iqr_rels",
           "stays_unsteady", "comm_can_explain", "comm_explains_everywhere", "late_tensor_exposed", "calls_match"]
