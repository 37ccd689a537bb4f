"""Case 1's verdicts, each decided by the numbers a notebook measured.

runs (01-03: the CPU runs the notebooks make, their counts and diagnose's
account of them) ; gpu (02-03: the recorded H200 pairs,
`data/runs/case1-h200-pairs.json`) ; model (03: the gap model and the
bucket order). Each is worded where it is made. A notebook calls them as `verdicts.NAME`.
"""

from .runs import (split_disjoint, two_workers_not_twice_as_fast, eval_wait, same_split, only_rank0_logs,
                   unused_heads_crash, every_rank_counts_all, order_repeats, epoch_longer_halved,
                   bytes_change_only_with, core_overbooked, distributed_count_equal, scaling_below,
                   diagnosis_sees_evaluation, diagnosis_agrees, diagnosis_shares_evaluation)
from .gpu import (machine_line, round_medians, pair, ratios, item_sync_costs, all_fixes_faster, autocast_faster,
                  unsteady, data_wait_share, loader_keeps_up, iqr_rels, stays_unsteady, jitter_not_loader)
from .model import late_tensor_exposed, calls_match

__all__ = ["split_disjoint", "two_workers_not_twice_as_fast", "eval_wait", "same_split", "only_rank0_logs",
           "unused_heads_crash", "every_rank_counts_all", "order_repeats", "epoch_longer_halved",
           "bytes_change_only_with", "core_overbooked", "distributed_count_equal", "scaling_below",
           "diagnosis_sees_evaluation", "diagnosis_agrees", "diagnosis_shares_evaluation",
           "machine_line", "round_medians", "pair", "ratios", "item_sync_costs", "all_fixes_faster",
           "autocast_faster", "unsteady", "data_wait_share", "loader_keeps_up", "iqr_rels", "stays_unsteady",
           "jitter_not_loader", "late_tensor_exposed", "calls_match"]
