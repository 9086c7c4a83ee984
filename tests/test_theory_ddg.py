"""Theorem 2's MSE bound and the error bound of a configured DDG (fedbandit.theory.ddg), against measurement."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedbandit.accounting.ddg import ddg_params, ddg_zcdp_epsilon
from fedbandit.experiments.trials import dme_trial
from fedbandit.theory.ddg import ddg_mse_bound, ddg_mse_terms, theorem2_gamma, theorem2_mse, theorem2_sigma

ALPHA = 1e-3  # false-alarm rate of each one-sided test below


def _measured(cfg, seed=0):
    r = dme_trial(cfg, np.random.default_rng(seed))
    return r, r["mse_ddg"]


def _exceeds(sample, bound) -> bool:
    """One-sided Student t test that the mean of ``sample`` exceeds ``bound`` at level ALPHA."""
    m, se = sample.mean(), sample.std(ddof=1) / math.sqrt(sample.size)
    return m - stats.t.ppf(1 - ALPHA, sample.size - 1) * se > bound


@pytest.mark.parametrize("n, bits, eps, growth", [(50, 16, 2.0, "conservative"), (50, 10, 2.0, "conservative"),
                                                  (200, 12, 4.0, "conservative"), (50, 12, 4.0, "optimistic")])
def test_configured_bound_holds(n, bits, eps, growth):
    cfg = dict(n=n, d=60, c=1.0, bits=bits, k=2, epsilon=eps, delta=1e-5, reps=60, norm_growth=growth)
    r, mse = _measured(cfg)
    assert not _exceeds(mse, r["mse_bound"]), (mse.mean(), r["mse_bound"])


def test_a_broken_bound_is_caught():
    """The same test rejects a bound that forgets the privacy noise's padding and rounding (noise over d only, halved)."""
    cfg = dict(n=50, d=60, c=1.0, bits=16, k=2, epsilon=2.0, delta=1e-5, reps=60)
    r, mse = _measured(cfg)
    p = ddg_params(16, 2, 50, 60, 1.0, 2.0, 1e-5)
    broken = 0.5 * p.sigma**2 / 50  # half the privacy noise, per coordinate of the mean
    assert _exceeds(mse, broken)
    assert not _exceeds(mse, r["mse_bound"])


def test_bound_terms_behave():
    lo = ddg_params(10, 2, 100, 250, 10.0, 2.0, 1e-5)
    hi = ddg_params(18, 2, 100, 250, 10.0, 2.0, 1e-5)
    t_lo, t_hi = ddg_mse_terms(lo), ddg_mse_terms(hi)
    assert t_lo["rounding_variance"] / t_lo["noise"] > t_hi["rounding_variance"] / t_hi["noise"]
    assert ddg_mse_bound(hi) >= t_hi["noise"]
    # a tighter norm bound on the sum shrinks only the wrap-around term
    assert ddg_mse_terms(hi, sum_norm=10.0 * 10)["wrap"] < t_hi["wrap"]
    b0 = ddg_params(12, 2, 100, 250, 10.0, 2.0, 1e-5, beta=0.0)
    assert ddg_mse_terms(b0)["rounding_bias"] == 0.0
    with pytest.raises(TypeError, match="DDGParams"):
        ddg_mse_bound({"sigma": 1.0})


def test_theorem2_parameters_meet_the_proof_s_conditions_and_scale_as_c2d_over_eps2():
    n, d, c = 1000, 256, 10.0
    for eps in (0.5, 1.0, 4.0):
        s, g = theorem2_sigma(c, n, eps), theorem2_gamma(c, n, d, eps)
        assert s == pytest.approx(2 * c / (eps * math.sqrt(n)))
        assert (s / g) ** 2 >= 8 * d / (eps**2 * n) * (1 - 1e-12)
        assert 20 * n * d * math.exp(-math.pi**2 * (s / g) ** 2) <= eps**2 / 4 * (1 + 1e-9)
        mse = theorem2_mse(c, n, d, eps)
        assert 4 * c * c * d / eps**2 <= mse <= 5 * c * c * d / eps**2
    # the book's calibrated DDG at the zCDP ε it achieves meets Theorem 2's bound where the bits suffice
    cfg = dict(n=100, d=250, c=10.0, bits=16, k=2, epsilon=2.0, delta=1e-5, reps=20)
    r, mse = _measured(cfg, seed=1)
    assert r["eps_cdp"] == pytest.approx(ddg_zcdp_epsilon(r["delta2"], r["sigma"], r["gamma"], 100, 256))
    sum_mse = mse * 250 * 100**2
    assert not _exceeds(sum_mse, theorem2_mse(10.0, 100, 256, r["eps_cdp"]))


def test_theorem2_at_its_own_parameters():
    """Theorem 2's configuration (theorem2_params: the proof's σ, γ, β and the fewest bits of its modular condition),
    not the book's calibration: Theorem 1's ε there is at most the theorem's ε (the privacy half, by the package's
    independent Theorem 1), the modular condition holds at theorem2_bits and not one bit below, and the error of the sum
    with every client's vector aligned (‖Σ x‖ = nc, the case the condition allows for) is not above the theorem's value
    there, and far above it two bits below (one-sided Student t tests at level ALPHA)."""
    from fedbandit.experiments.trials import theorem2_trial
    from fedbandit.theory.ddg import theorem2_bits, theorem2_params

    c, n, d = 10.0, 100, 250
    for eps in (1.0, 4.0):
        p = theorem2_params(c, n, d, eps)
        assert p.beta == 1 / n and p.sigma == theorem2_sigma(c, n, eps)
        assert ddg_zcdp_epsilon(p.delta2, p.sigma, p.gamma, n, p.d_pad) <= eps
        b = theorem2_bits(c, n, p.d_pad, eps)
        sigma_hat = math.sqrt(c * c * n * n / p.d_pad + (p.gamma**2 / 4 + p.sigma**2) * n)
        for bb, ok in ((b, True), (b - 1, False)):  # the condition written out
            m = 2.0**bb
            assert (p.gamma * m >= sigma_hat * math.sqrt(8 * math.log(1 + m * m / n))) == ok
        at = theorem2_trial(dict(n=n, d=d, c=c, epsilon=eps, reps=40, aligned=True), np.random.default_rng(1))
        below = theorem2_trial(dict(n=n, d=d, c=c, epsilon=eps, reps=40, aligned=True, bits=b - 2),
                               np.random.default_rng(2))
        assert at["bits"] == b and at["wrap"] == 0.0
        assert not _exceeds(at["mse"], at["theorem2_mse"]), (at["mse"].mean(), at["theorem2_mse"])
        assert _exceeds(below["mse"], below["theorem2_mse"]), (below["mse"].mean(), below["theorem2_mse"])
