"""Claim 4b of notebook 02: 4 loader workers against 8, nothing else changed, in interleaved rounds,
read with its spread (`scaling.worker_variants`, `step_by_round`, `describe_pair`)."""

import pytest

from ddp_lessons import launch
from ddp_lessons.cases import case1
from ddp_lessons.cases.case1 import scaling


def test_worker_variants_change_num_workers_alone_in_interleaved_rounds():
    arms = scaling.worker_variants(case1.Options.broken(), (4, 8), n=3, steps_limit=5)
    assert list(arms) == ["0 workers=4", "0 workers=8", "1 workers=8", "1 workers=4",
                          "2 workers=8", "2 workers=4"]
    assert arms["0 workers=4"].diff(arms["0 workers=8"]) == {"num_workers": (4, 8)}
    assert all(o.steps_limit == 5 and o.evaluation == "none" for o in arms.values())
    # the rest as posted: only measurement and the evaluation (off in both arms) differ from the post
    assert set(arms["0 workers=4"].diff(case1.Options.broken())) == {"steps_limit", "evaluation"}


def _ranks(*steps):
    return [{"timer": {"steps": [{"step_time": t} for t in s]}} for s in steps]


def test_step_by_round_pairs_each_round_and_keeps_the_slower_rank():
    runs = {"0 workers=4": _ranks([9, 9, 0.10, 0.10], [9, 9, 0.12, 0.12]),
            "0 workers=8": _ranks([9, 9, 0.20, 0.20], [9, 9, 0.11, 0.11]),
            "1 workers=8": _ranks([9, 9, 0.30, 0.30], [9, 9, 0.30, 0.30]),
            "1 workers=4": _ranks([9, 9, 0.40, 0.40], [9, 9, 0.10, 0.10])}
    by = scaling.step_by_round(runs)
    assert by == {"workers=4": pytest.approx([0.12, 0.40]), "workers=8": pytest.approx([0.20, 0.30])}


def test_describe_pair_says_not_resolvable_inside_the_spread():
    text = scaling.describe_pair({"workers=4": [1.0, 1.0, 1.0], "workers=8": [0.9, 1.1, 1.0]},
                                 "workers=4", "workers=8")
    assert "0.90 .. 1.10 over 3 rounds" in text and "not resolvable here" in text


def test_describe_pair_names_the_side_and_its_chance_level():
    shorter = scaling.describe_pair({"a": [1.0] * 5, "b": [0.8, 0.9, 0.85, 0.82, 0.88]}, "a", "b")
    assert "b shorter in every round" in shorter and "6.2%" in shorter
    longer = scaling.describe_pair({"a": [1.0] * 5, "b": [1.2] * 5}, "a", "b")
    assert "b longer in every round" in longer


@pytest.mark.slow
def test_the_rounds_run_with_4_and_8_workers_per_rank():
    arms = scaling.worker_variants(case1.Options.broken(), (4, 8), n=2, steps_limit=3)
    runs = dict(zip(arms, case1.by_run(launch(case1.train_many, (list(arms.values()), None, 1),
                                              world_size=2, threads=1)), strict=True))
    assert {name: [r["num_workers"] for r in ranks] for name, ranks in runs.items()} == {
        "0 workers=4": [4, 4], "0 workers=8": [8, 8], "1 workers=8": [8, 8], "1 workers=4": [4, 4]}
    by = scaling.step_by_round(runs)
    assert len(by["workers=4"]) == len(by["workers=8"]) == 2
