"""ddp_lessons.tool.verdict: each way of deciding comes out every way it can."""

import re
from configparser import ConfigParser
from pathlib import Path

import pytest

from ddp_lessons.tool import verdict as V


def test_interval_three_outcomes_each_side():
    assert V.interval("x", 1.2, 1.5, side=">", limit=1.0).holds
    assert V.interval("x", 0.5, 0.9, side=">", limit=1.0).fails
    assert V.interval("x", 0.9, 1.1, side=">", limit=1.0).status == V.UNRESOLVED
    assert V.interval("x", 0.5, 0.9, side="<", limit=1.0).holds
    assert V.interval("x", 1.2, 1.5, side="<", limit=1.0).fails
    assert V.interval("x", 1.0, 1.0, side="<", limit=1.0).status == V.UNRESOLVED  # on the limit


def test_repeats_need_a_spread():
    assert V.repeats("x", [2.0], side=">", limit=1.0).status == V.UNRESOLVED  # one run: no spread
    five = V.repeats("x", [2.0, 2.1, None, 1.9, 2.2, 2.05], side=">", limit=1.0)
    assert five.holds and five.numbers["chance level"] == "6%"  # 2 / 2**5
    assert "chance level" not in V.repeats("x", [2.0, 2.1], side=">", limit=1.0).numbers  # unresolved: none
    assert V.repeats("x", [2.0, 2.1, None, 1.9, 2.2], side=">", limit=1.0).status == V.UNRESOLVED  # 4 repeats
    assert V.repeats("x", [2.0, 0.9, 2.1, 2.2, 1.9], side=">", limit=1.0).status == V.UNRESOLVED


def test_paired_is_the_sign_test_of_ratios():
    a, b = [10, 11, 10, 12, 10], [8, 9, 9, 10, 8]
    assert V.paired("B faster", a, b).holds
    assert V.paired("A faster", a, b, faster="a").fails
    assert V.paired("B faster", a, [8, 12, 9, 10, 8]).status == V.UNRESOLVED
    assert V.paired("B faster", a[:2], b[:2]).status == V.UNRESOLVED  # too few rounds
    assert V.paired("B faster", [10, None, 10, 10, 10, 10, 10], [9, 9, None, 9, 9, 9, 9]).status == V.HOLDS  # 5 paired
    assert V.paired("B faster", [10, None, 10, 10, 10, 10], [9, 9, None, 9, 9, 9]).status == V.UNRESOLVED  # 4 paired
    assert V.paired("B faster", a, []).status == V.UNRESOLVED  # a setup that never ran
    with pytest.raises(ValueError, match="4 rounds of A against 5 of B"):
        V.paired("B faster", a[:4], b)  # unequal repeat counts are not paired silently


def test_exact_and_all_of():
    assert V.exact("n", 3, expected=3).holds and V.exact("n", 2, expected=3).fails
    assert V.exact("n", 5, side=">", limit=4).holds and V.exact("n", 4, side=">", limit=4).fails
    h, f, u = V.exact("a", 1, expected=1), V.exact("b", 1, expected=2), V.repeats("c", [1], side=">", limit=0)
    assert V.all_of("all", h, h).holds and V.all_of("all", h, f).fails and V.all_of("all", h, u).status == V.UNRESOLVED


def test_bad_input_is_refused_in_one_line():
    for call in (lambda: V.interval("x", 1, 2, side=">=", limit=1), lambda: V.interval("x", 2, 1, side=">", limit=1),
                 lambda: V.paired("x", [1], [1], faster="c"), lambda: V.exact("x", 1),
                 lambda: V.Verdict("x", "maybe")):
        with pytest.raises(ValueError):
            call()
    with pytest.raises(TypeError, match="three outcomes"):
        bool(V.exact("n", 1, expected=1))


def test_printed_verdict_line_survives_sanitising_and_numbers_do_not():
    cfg = ConfigParser()
    cfg.read(Path(__file__).resolve().parents[2] / "nbval_sanitize.cfg")
    text = str(V.repeats("2 ranks are slower", [1.21, 1.3, 1.34, 1.25, 1.28], side=">", limit=1.0, what="ratio"))
    for sec in cfg.sections():
        text = re.sub(cfg[sec]["regex"], cfg[sec]["replace"], text)
    assert text.splitlines() == ["verdict: HOLDS - 2 ranks are slower", "  deciding numbers: NUMBERS"]


def test_a_verdict_ending_a_cell_prints_once(capsys):
    v = V.exact("n", 1, expected=1)
    v._ipython_display_()                 # `v` alone at the end of a cell
    assert capsys.readouterr().out.count("verdict: HOLDS") == 1
    v.show()._ipython_display_()          # `v.show()` at the end of a cell
    assert capsys.readouterr().out.count("verdict: HOLDS") == 1


def test_separated_by_quartiles_survives_one_disturbed_repeat():
    a = [0.22, 0.21, 0.23, 0.22, 0.22, 0.23]
    b = [0.13, 0.12, 0.12, 0.12, 0.12, 0.27]     # one round disturbed: a sign test would not resolve
    assert V.paired("B faster", a, b).status == V.UNRESOLVED
    assert V.separated("B faster", a, b).holds
    assert V.separated("A faster", a, b, faster="a").fails
    assert V.separated("B faster", a, [0.2, 0.25, 0.21, 0.24, 0.22, 0.23]).status == V.UNRESOLVED
    assert V.separated("B faster", a[:2], b[:2]).status == V.UNRESOLVED


def test_a_worded_verdict_prints_the_authors_sentence_for_its_outcome_and_one_figure():
    words = dict(holds="Two ranks are slower here.", fails="Two ranks are faster here.", figure="ratio 1.2")
    slow = V.worded(V.repeats("2 ranks are slower", [1.2, 1.3, 1.25, 1.22, 1.4], side=">", limit=1.0), **words)
    fast = V.worded(V.repeats("2 ranks are slower", [0.8, 0.7, 0.9, 0.85, 0.75], side=">", limit=1.0), **words)
    both = V.worded(V.repeats("2 ranks are slower", [0.8, 1.3, 0.9, 0.85, 1.1], side=">", limit=1.0), **words)
    assert str(slow).splitlines() == ["verdict: Two ranks are slower here.",
                                      "  deciding numbers: ratio 1.2; chance level 6%"]
    assert fast.sentence == "Two ranks are faster here."
    assert both.sentence.startswith("This run cannot tell whether 2 ranks are slower")
    assert "rule:" in slow.explain() and "min .. max of 5" in slow.explain()
    with pytest.raises(ValueError, match="each outcome"):
        V.Verdict("c", V.HOLDS, says={V.HOLDS: "yes"})
