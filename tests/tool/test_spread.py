"""ddp_lessons.tool.spread: summaries of repeats, interleaving, and the verdict rule."""

import pytest

from ddp_lessons.tool import spread


def test_quartiles_interpolate_like_numpy():
    # numpy.percentile([1, 2, 3, 4], [25, 50, 75]) -> 1.75, 2.5, 3.25
    assert spread.quartiles([4, 1, 3, 2]) == pytest.approx((1.75, 2.5, 3.25))
    assert spread.quartiles([1, 2, 3, 4, 5]) == (2.0, 3.0, 4.0)
    assert spread.quartiles([7]) == (7.0, 7.0, 7.0)
    with pytest.raises(ValueError):
        spread.quartiles([])


def test_summary_and_steady():
    s = spread.summary([0.2, 0.1, 0.3, 0.4, 0.5])
    assert s == pytest.approx({"n": 5, "median": 0.3, "q1": 0.2, "q3": 0.4, "iqr": 0.2,
                               "iqr_rel": 0.2 / 0.3, "min": 0.1, "max": 0.5})
    assert spread.steady([100, 101, 102, 103, 104, 250])      # one outlier: IQR 2.5 of 102.5
    assert not spread.steady([139, 223, 150, 200, 170])       # the jitter seen in case 1's bf16 run
    assert spread.steady([1.0, 1.05, 1.1], limit=0.05)        # IQR 0.05 of 1.05: just inside
    assert spread.summary([0, 0])["iqr_rel"] == float("inf")


def test_interleave_two_alternates_and_balances():
    assert spread.interleave("AB", 5) == [list("AB"), list("BA"), list("BA"), list("AB"), list("AB")]
    assert spread.interleave([], 2) == [[], []]


def test_interleave_five_puts_every_name_first_and_last():
    order = spread.interleave("ABCDE", 5)
    assert order[:3] == [list("ABCDE"), list("EDCBA"), list("BCDEA")]
    assert all(sorted(r) == list("ABCDE") for r in order)
    # each adjacent pair of the list runs in both orders over the rounds
    for a, b in zip("ABCD", "BCDE", strict=True):
        before = [r.index(a) < r.index(b) for r in order]
        assert True in before and False in before


@pytest.mark.parametrize("ratios, expected", [
    ([0.80, 0.82, 0.79, 0.81, 0.80], spread.B_FASTER),
    ([1.2, 1.3, 1.25, 1.22, 1.28], spread.A_FASTER),
    # counter-example: the median says 20% faster, but one round disagrees
    ([0.8, 0.8, 0.8, 0.8, 1.01], spread.INSIDE),
    # counter-example: a tiny difference, but every round agrees
    ([0.995, 0.99, 0.998, 0.997, 0.999], spread.B_FASTER),
    # one round with no difference at all is not a vote for either
    ([0.9, 0.9, 1.0, 0.9, 0.9], spread.INSIDE),
    # too few rounds resolve nothing, however large the difference
    ([0.5, 0.5, 0.5, 0.5], "not resolvable: fewer than 5 paired rounds"),
    ([], "not resolvable: fewer than 5 paired rounds"),
])
def test_verdict(ratios, expected):
    assert spread.verdict(ratios) == expected


def test_inside_spread():
    assert spread.inside_spread([0.9, 1.1])
    assert spread.inside_spread([1.0])
    assert not spread.inside_spread([0.9, 0.99])


def test_compare_pairs_rounds_and_skips_failures():
    a = [0.20, 0.21, None, 0.20, 0.22, 0.20, 0.21]
    b = [0.10, 0.11, 0.10, None, 0.10, 0.12, 0.10]
    c = spread.compare_rounds(a, b)
    assert c["rounds"] == 5
    assert c["ratios"] == pytest.approx([0.5, 0.11 / 0.21, 0.10 / 0.22, 0.6, 0.10 / 0.21])
    assert c["median_ratio"] == pytest.approx(0.5)
    assert (c["min_ratio"], c["max_ratio"]) == pytest.approx((0.10 / 0.22, 0.6))
    assert c["a_median"] == pytest.approx(0.21) and c["b_median"] == pytest.approx(0.10)
    assert c["chance_level"] == pytest.approx(2 / 2**5)
    assert c["verdict"] == spread.B_FASTER
    # one failed round more leaves 4 paired: too few to decide, however clear the difference
    assert spread.compare_rounds(a[:-1], b[:-1])["verdict"] == "not resolvable: fewer than 5 paired rounds"


def test_compare_with_nothing_paired():
    c = spread.compare_rounds([None, 0.1], [0.1, None])
    assert c["rounds"] == 0 and c["median_ratio"] is None
    assert c["verdict"].startswith("not resolvable")


def test_median_interval_is_the_sign_tests():
    # the textbook order statistics for a 95% interval of the median: n=6 -> (1st, 6th), n=20 -> (6th, 15th),
    # n=30 -> (10th, 21st); under 6 values no interval reaches 95%
    assert spread.median_interval(range(1, 6)) is None
    assert spread.median_interval([6, 1, 5, 2, 4, 3]) == (1.0, 6.0)
    assert spread.median_interval(range(1, 21)) == (6.0, 15.0)
    assert spread.median_interval(range(1, 31)) == (10.0, 21.0)
    # a lower level narrows it
    assert spread.median_interval(range(1, 21), level=0.5) == (8.0, 13.0)
