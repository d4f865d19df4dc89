"""The statistics of held-out scoring: the Wilson interval and the exact McNemar test
(``learners.evaluation.heldout``), checked against values worked by hand."""

import pytest

from learners.evaluation import heldout


@pytest.mark.parametrize(
    "k, n, low, high",
    [
        # values worked by hand from the closed form (p = k/n, z = 1.96)
        (0, 10, 0.0, 0.27753),
        (5, 10, 0.23659, 0.76341),
        (10, 10, 0.72247, 1.0),
        (30, 200, 0.10714, 0.20606),
    ],
)
def test_wilson_interval_matches_the_closed_form(k, n, low, high):
    lo, hi = heldout.wilson(k, n)
    assert lo == pytest.approx(low, abs=1e-5) and hi == pytest.approx(high, abs=1e-5)


def test_wilson_edge_cases():
    assert heldout.wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        heldout.wilson(3, 2)


@pytest.mark.parametrize(
    "gained, lost, p",
    [
        (6, 0, 2 * 0.5**6),  # 0.03125
        (9, 1, 2 * 11 / 1024),  # 2 P(X <= 1), X ~ Bin(10, 1/2)
        (3, 3, 1.0),
        (0, 0, 1.0),
        (1, 4, 2 * 6 / 32),
    ],
)
def test_mcnemar_exact_is_the_two_sided_binomial_on_discordant_pairs(gained, lost, p):
    base = [False] * gained + [True] * lost + [True] * 5 + [False] * 7
    final = [True] * gained + [False] * lost + [True] * 5 + [False] * 7
    g, l_, pv = heldout.mcnemar_exact(base, final)
    assert (g, l_) == (gained, lost) and pv == pytest.approx(p)


def test_mcnemar_refuses_unpaired_lists():
    with pytest.raises(ValueError, match="paired"):
        heldout.mcnemar_exact([True], [True, False])
