"""claim_mean and claim_ratio_of_means: the formulas written out, their coverage, their refusals."""

import math

import numpy as np
import pytest
from scipy import stats

from fedbandit.experiments.statistics import claim_mean, claim_ratio_of_means

ALPHA = 1e-4  # false-alarm rate of each coverage test below (two-sided binomial)


def test_claim_mean_is_the_student_t_interval():
    x = np.array([1.0, 2.5, 0.5, 3.0, 2.0])
    m, s, n = x.sum() / 5, math.sqrt(((x - x.sum() / 5) ** 2).sum() / 4), 5
    half = stats.t.ppf(0.95, n - 1) * s / math.sqrt(n)  # 90 % two-sided
    c = claim_mean("q", x, confidence=0.9)
    assert (c.estimate, c.low, c.high) == pytest.approx((m, m - half, m + half), rel=1e-12)


def test_claim_ratio_of_means_is_the_log_delta_interval_at_welch_dof():
    a, b = np.array([4.0, 5.0, 6.5, 5.5]), np.array([2.0, 2.5, 1.5, 2.2, 1.8, 2.0])
    ma, mb = a.mean(), b.mean()
    ra2, rb2 = a.var(ddof=1) / (a.size * ma**2), b.var(ddof=1) / (b.size * mb**2)  # squared relative s.e.
    nu = (ra2 + rb2) ** 2 / (ra2**2 / (a.size - 1) + rb2**2 / (b.size - 1))
    half = stats.t.ppf(0.975, nu) * math.sqrt(ra2 + rb2)
    c = claim_ratio_of_means("r", a, b, confidence=0.95)
    assert (c.estimate, c.low, c.high) == pytest.approx((ma / mb, ma / mb * math.exp(-half), ma / mb * math.exp(half)),
                                                        rel=1e-12)


def _coverage_bounds(reps, confidence):
    # the counts a correct interval gives with probability 1 − ALPHA
    return stats.binom.ppf(ALPHA / 2, reps, confidence), stats.binom.isf(ALPHA / 2, reps, confidence)


def test_the_intervals_cover_at_their_confidence():
    rng, reps, conf = np.random.default_rng(20261206), 1000, 0.9
    lo, hi = _coverage_bounds(reps, conf)
    mean_hits = sum(claim_mean("q", rng.normal(3.0, 2.0, 8), confidence=conf).admits_value(3.0) for _ in range(reps))
    assert lo <= mean_hits <= hi
    # small relative errors (the delta method's domain): true ratio 10/4
    ratio_hits = sum(claim_ratio_of_means("r", rng.normal(10.0, 1.0, 12), rng.normal(4.0, 0.5, 7),
                                          confidence=conf).admits_value(2.5) for _ in range(reps))
    assert lo <= ratio_hits <= hi


def test_the_coverage_check_catches_an_interval_that_ignores_the_denominators_noise():
    # the broken variant: the numerator's relative error only (as if the denominator were exact)
    rng, reps, conf = np.random.default_rng(7), 1000, 0.9
    lo, _ = _coverage_bounds(reps, conf)
    hits = 0
    for _ in range(reps):
        a, b = rng.normal(10.0, 1.0, 12), rng.normal(4.0, 0.5, 7)
        broken = claim_mean("q", a / b.mean(), confidence=conf)
        hits += broken.admits_value(2.5)
    assert hits < lo


def test_a_wrong_prediction_is_excluded():
    rng = np.random.default_rng(3)
    c = claim_ratio_of_means("r", rng.normal(10.0, 1.0, 200), rng.normal(4.0, 0.5, 200), confidence=0.999,
                             prediction=("true", 2.5), alternatives=(("wrong", 2.5 * 1.3),))
    assert c.admits("true") and c.excludes("wrong")


@pytest.mark.parametrize("call, match", [
    (lambda: claim_mean("q", [1.0]), "at least 2 runs"),
    (lambda: claim_mean("q", [[1.0, 2.0]]), "values"),
    (lambda: claim_ratio_of_means("r", [1.0, 2.0], [1.0]), "denominator"),
    (lambda: claim_ratio_of_means("r", [-1.0, -2.0], [1.0, 2.0]), "numerator: the mean must be positive"),
    (lambda: claim_mean("q", [1.0, 2.0], confidence=1.5), "confidence"),
])
def test_bad_input_is_refused_with_the_parameter_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
