"""False-alarm rates of "k combined standard errors" over few runs: Student t with Welch's degrees of freedom.

Over n runs per arm the studentized gap (mean_b − mean_a)/sqrt(se_a² + se_b²) of two equal
means is close to Student t with the Welch–Satterthwaite degrees of freedom, not normal:
"3 standard errors" is a one-sided rate of 1.2 % at 4 runs each, 0.38 % at 10 (normal:
0.13 %).  The simulation below checks the helpers' rates against the actual frequency,
and checks that the normal rate is refuted by it (so the test can tell the two apart).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedbandit.experiments.statistics import gap_false_alarm, gap_threshold, mean_gap, welch_dof

ALPHA = 1e-4  # false-alarm rate of each binomial test below


def test_welch_dof_is_scale_free_where_the_fourth_powers_under_or_overflow():
    """ν depends on the standard errors' ratio only; se⁴ below the float range (hypothesis found
    se = 2.2e-103 against 0) or above it must give the same ν as at unit scale, not a ZeroDivisionError."""
    for scale in (1e-103, 1e-170, 1e90):  # se is validated to at most 1e100
        assert welch_dof(0.3 * scale, 5, 0.7 * scale, 9) == pytest.approx((0.09 + 0.49) ** 2 / (0.09**2 / 4 + 0.49**2 / 8))
        assert welch_dof(0.0, 2, scale, 2) == pytest.approx(1.0)  # only b varies: ν = n_b − 1
        assert welch_dof(scale, 7, 0.0, 3) == pytest.approx(6.0)


def test_welch_dof_formula():
    # ν = (sa² + sb²)² / (sa⁴/(na − 1) + sb⁴/(nb − 1)) written out; equal samples give 2(n − 1)
    assert welch_dof(1.0, 4, 1.0, 4) == pytest.approx(6.0)
    assert welch_dof(0.3, 5, 0.7, 9) == pytest.approx((0.09 + 0.49) ** 2 / (0.09**2 / 4 + 0.49**2 / 8))
    assert welch_dof(1.0, 10, 0.0, 3) == pytest.approx(9.0)  # one noiseless arm: the other's n − 1
    assert welch_dof(0.0, 3, 0.0, 5) == 6.0


def test_rates_and_thresholds_are_the_t_distribution():
    for dof in (2.0, 6.0, 18.0, 48.0):
        assert gap_false_alarm(3, dof) == pytest.approx(stats.t.sf(3, dof))
        assert gap_false_alarm(3, dof, sided="two") == pytest.approx(2 * stats.t.sf(3, dof))
        k = gap_threshold(1e-3, dof)
        assert gap_false_alarm(k, dof) == pytest.approx(1e-3)
    assert gap_false_alarm(3, math.inf) == pytest.approx(stats.norm.sf(3))
    # the numbers: 4–10 runs per arm give 1.2 % – 0.38 % one-sided, not the normal 0.13 %
    assert gap_false_alarm(3, welch_dof(1, 4, 1, 4)) == pytest.approx(0.0120, abs=5e-4)
    assert gap_false_alarm(3, welch_dof(1, 10, 1, 10)) == pytest.approx(0.00384, abs=1e-4)


def test_mean_gap_matches_scipy_welch():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 5), rng.normal(0.5, 2, 8)
    g = mean_gap(a, b)
    ref = stats.ttest_ind(b, a, equal_var=False)
    assert g.t == pytest.approx(ref.statistic) and g.diff == pytest.approx(b.mean() - a.mean())
    assert g.false_alarm(abs(g.t), sided="two") == pytest.approx(ref.pvalue)


@pytest.mark.parametrize("n", [4, 10])
def test_simulated_false_alarm_of_3_standard_errors(n):
    """Under equal means, P(gap > 3) over n runs per arm is the t rate, and the normal rate is refuted."""
    rng = np.random.default_rng(n)
    trials = 200_000
    a, b = rng.standard_normal((2, trials, n))
    se = np.hypot(a.std(axis=1, ddof=1), b.std(axis=1, ddof=1)) / math.sqrt(n)
    hits = int(np.sum((b.mean(axis=1) - a.mean(axis=1)) / se > 3))
    t_rate = gap_false_alarm(3, welch_dof(1.0, n, 1.0, n))  # equal variances: ν = 2(n − 1) in expectation
    assert stats.binomtest(hits, trials, t_rate).pvalue > ALPHA, (hits / trials, t_rate)
    assert stats.binomtest(hits, trials, stats.norm.sf(3), alternative="greater").pvalue < ALPHA
