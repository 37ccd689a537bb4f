"""Notebook 07's claims (ddp_lessons.cases.own.claims): each holds on numbers like this machine's and fails
on a plausible counter-example; and the readouts that take their numbers from a run."""

import pytest

from ddp_lessons.tool import verdict as v
from ddp_lessons.cases.own import readout
from ddp_lessons.cases.own.claims import CLAIMS

SEVEN = 7


def test_the_table_is_in_notebook_order_and_leans_on_seven_rounds():
    assert list(CLAIMS) == ["evaluation_costs_most", "fix_saves_time", "doctor_ranks_evaluation_first"]
    assert all(c.min_rounds >= SEVEN for c in CLAIMS.values() if c.rule != "exact")
    for c in CLAIMS.values():   # nbval compares the sentence: no figure in it
        assert not any(ch.isdigit() for s in (c.holds, c.fails, c.unresolved) for ch in s.replace("2 ranks", ""))


# evaluation_costs_most: the duplicated evaluation / every other measured cause, summed over the ranks, per round

def test_evaluation_costs_most_holds_on_this_machines_ratios():
    # recorded here beside a loaded machine: 2.95 .. 5.33 over 5 rounds, 4.5 at load 4
    assert CLAIMS.decide("evaluation_costs_most", [2.95, 5.33, 3.4, 4.1, 4.5, 3.2, 3.9]).holds


def test_evaluation_costs_most_fails_when_the_loader_waits_longer():
    # a machine where the PIL augmentation in the main process is slow: the data wait outweighs it every round
    assert CLAIMS.decide("evaluation_costs_most", [0.6, 0.7, 0.55, 0.8, 0.65, 0.7, 0.6]).fails


def test_evaluation_costs_most_is_unresolved_when_one_round_swells_or_rounds_are_few():
    assert CLAIMS.decide("evaluation_costs_most", [2.0, 0.9, 2.1, 1.9, 2.2, 2.0, 1.8]).status == v.UNRESOLVED
    assert CLAIMS.decide("evaluation_costs_most", [3.0] * 5).status == v.UNRESOLVED   # 5 rounds: too few


# fix_saves_time: the 2-rank run times' quartiles, fixed against broken

def test_fix_saves_time_holds_when_fixed_is_shorter_every_round():
    broken = [1.26, 1.03, 1.02, 1.16, 0.85, 1.1, 1.05]
    fixed = [0.80, 0.82, 0.86, 0.68, 0.75, 0.7, 0.78]
    v_ = CLAIMS.decide("fix_saves_time", broken, fixed)
    assert v_.holds and "0.59 .. 0.88, median 0.74 (7 rounds)" in str(v_)


def test_fix_saves_time_holds_when_one_round_is_disturbed():
    # beside a busy neighbour one round of the fixed setup ran slow: the quartiles keep the decision
    broken = [1.26, 1.03, 1.02, 1.16, 0.85, 1.1, 1.05]
    fixed = [0.80, 0.82, 1.4, 0.68, 0.75, 0.7, 0.78]
    assert CLAIMS.decide("fix_saves_time", broken, fixed).holds


def test_fix_saves_time_fails_when_the_workers_start_costs_more_than_it_saves():
    # a short run on a machine with spare cores: 15 loader workers forked in the first step (the H200 record)
    broken = [2.95, 2.36, 2.15, 2.42, 2.29, 2.3, 2.4]
    fixed = [3.1, 2.48, 2.70, 2.61, 2.39, 2.5, 2.6]
    assert CLAIMS.decide("fix_saves_time", broken, fixed).fails


def test_fix_saves_time_is_unresolved_when_the_rounds_disagree():
    broken = [1.0, 1.1, 0.95, 1.05, 0.9, 1.0, 1.02]
    fixed = [0.97, 1.08, 0.93, 1.04, 0.96, 0.99, 1.01]
    assert CLAIMS.decide("fix_saves_time", broken, fixed).status == v.UNRESOLVED
    assert CLAIMS.decide("fix_saves_time", broken[:5], [0.5] * 5).status == v.UNRESOLVED   # 5 rounds: too few


# doctor_ranks_evaluation_first: the doctor's first finding on the plain script

def _diagnosis(*found):
    """A `Diagnosis` as far as `readout.first_finding` reads it: findings (cause, what), most costly first."""
    from types import SimpleNamespace

    from ddp_lessons.tool.diagnosis.report import Finding
    return SimpleNamespace(findings=[Finding(c, w, 1.0, 0.5, [1.0, 1.0], "", "", "") for c, w in found])


def _decide_doctor(*found):
    return CLAIMS.decide("doctor_ranks_evaluation_first", readout.first_finding(_diagnosis(*found)))


def test_doctor_ranks_evaluation_first_holds_when_the_evaluation_leads():
    # the doctor's name for forwards without gradients between steps
    v_ = _decide_doctor(("outside_steps", "evaluation (forwards without gradients)"), ("data_loading", ""))
    assert v_.holds and "first finding: outside_steps: evaluation" in str(v_)


def test_doctor_ranks_evaluation_first_fails_when_other_work_outside_the_steps_leads():
    # a script that saves a checkpoint every epoch: work outside the steps, but not the evaluation
    assert _decide_doctor(("outside_steps", "checkpoint (torch.save)"),
                          ("outside_steps", "evaluation (forwards without gradients)")).fails
    assert _decide_doctor(("outside_steps", "loader workers starting and stopping (at each pass over a loader)")).fails


def test_doctor_ranks_evaluation_first_fails_when_data_wait_ranks_above_it():
    # a machine where the script's loader stalls its steps longer than its evaluation lasts
    assert _decide_doctor(("data_loading", ""), ("outside_steps", "evaluation (forwards without gradients)")).fails
    assert _decide_doctor().fails and readout.first_finding(None) == "none"


def test_an_unknown_claim_names_the_table():
    with pytest.raises(KeyError, match="evaluation_costs_most"):
        CLAIMS.decide("speedup_below", [1.0])


# the readouts the claims and readings take their numbers from

def _rank(rank=0, world=2, eval_s=(0.5, 0.5), train_s=(0.6, 0.6), data=0.01, log=0.001, exposed=0.002, n=4):
    steps = [{"step": i, "step_time": 0.05, "t_start": 0.1 * i, "data": data, "log": log, "exposed": exposed}
             for i in range(n)]
    timer = {"rank": rank, "world_size": world, "batch_size": 32, "steps": steps,
             "account": {"wall": 2.5, "steps": 1.2, "outside": {"eval": 1.0}, "before_first_step": 0.1}}
    epochs = [{"epoch": e, "steps": n // 2, "first_step": e * n // 2, "train_s": t, "eval_s": ev, "eval_samples": 1024}
              for e, (t, ev) in enumerate(zip(train_s, eval_s, strict=True))]
    return {"rank": rank, "world_size": world, "wall_s": 2.5 + rank, "epochs": epochs, "timer": timer,
            "order": [[3, 1, 2], [3, 1, 2]]}


def _raw(rounds=2):
    """What launch(train.rounds, ...) returns: per rank, setup -> its results per round."""
    r0 = {"runs": {"broken x1": [_rank(world=1) for _ in range(rounds)],
                   "broken x2": [_rank() for _ in range(rounds)]}, "order": [["broken x1", "broken x2"]], "rank": 0}
    r1 = {"runs": {"broken x1": [], "broken x2": [_rank(rank=1) for _ in range(rounds)]}, "order": [], "rank": 1}
    return [r0, r1]


def test_the_rounds_read_as_a_record_of_runs():
    rec = readout.record(_raw())
    assert rec.setups == ["broken x1", "broken x2"]
    one, two = rec.rounds("broken x1"), rec.rounds("broken x2")
    assert [len(r) for r in one] == [1, 1] and [len(r) for r in two] == [2, 2]
    assert readout.times(rec) == {"broken x1": [2.5, 2.5], "broken x2": [3.5, 3.5]}   # the slowest rank's wall
    assert readout.eval_samples(two[0][1]) == 1024 and two[0][1]["order"][0] == [3, 1, 2]


def test_costs_charge_the_evaluation_beyond_each_ranks_share_only_where_it_is_duplicated():
    two = readout.record(_raw()).rounds("broken x2")[0]
    costs = readout.costs(two)
    assert costs[0]["duplicated evaluation"] == pytest.approx(0.5)         # (0.5 + 0.5) x (1 - 1/2)
    assert costs[0]["data wait"] == pytest.approx(0.04) and list(costs[0]) == list(readout.CAUSES)
    assert readout.costs(two, duplicated=False)[0]["duplicated evaluation"] == 0.0
    assert readout.cost_ratio(two) == pytest.approx(1.0 / (2 * (0.04 + 0.004 + 0.008)))


def test_eval_share_and_coverage():
    rank = readout.record(_raw()).rounds("broken x1")[0][0]
    assert readout.eval_share(rank) == pytest.approx(1.0 / 2.2)
    assert readout.evaluation(rank) == pytest.approx(1.0)
    assert readout.coverage(rank) == pytest.approx(2.2 / 2.5)


def test_paired_reads_one_setups_run_time_over_anothers_round_by_round():
    r = readout.paired({"a": [2.0, 1.0, 4.0], "b": [1.0, 0.9, 2.0]}, "a", "b")
    assert (r["median"], r["lo"], r["hi"], r["rounds"]) == (0.5, 0.5, 0.9, 3)


def test_with_passes_adds_each_epochs_first_step_and_keeps_the_run():
    run = readout.record(_raw()).rounds("broken x2")[0]
    passed = readout.with_passes(run)
    assert passed[0].timer["pass_starts"] == [0, 2] and passed[0].timer["data_passes"] == 2
    assert "pass_starts" not in run[0].timer and len(passed) == 2
