"""Optimal composition (Kairouz, Oh & Viswanath 2015, Thm. 3.3) against first principles.

* the closed form against the hockey-stick divergence of the m-fold product of the
  (ε₀, δ₀) dominating pair, enumerated outcome by outcome (4^m outcomes, m ≤ 6);
* the theorem's own δ_i at ε = (m − 2i) ε₀, written out here;
* dp-accounting's privacy-loss distribution of the same pair, self-composed;
* the per-mechanism budget: within the target, maximal, and never below basic or advanced
  composition at the same δ₀ (the claim chapter 4 states).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from fedbandit.accounting.allocation import advanced_wins_from, mechanism_budget
from fedbandit.accounting.composition import (
    optimal_composition_delta,
    optimal_composition_epsilon,
    split_budget_optimal,
)


def _pair(eps0, delta0):
    """The four-outcome (ε₀, δ₀) pair of KOV's Thm. 3.3 proof: P and its mirror Q."""
    e = math.exp(eps0)
    p = np.array([delta0, (1 - delta0) * e / (1 + e), (1 - delta0) / (1 + e), 0.0])
    return p, p[::-1].copy()


def _brute_delta(epsilon, eps0, delta0, m):
    """Σ over the 4^m outcomes of max(0, P^m(o) − e^ε Q^m(o))."""
    p, q = _pair(eps0, delta0)
    total = 0.0
    for outcome in itertools.product(range(4), repeat=m):
        pp = math.prod(p[i] for i in outcome)
        qq = math.prod(q[i] for i in outcome)
        total += max(0.0, pp - math.exp(epsilon) * qq)
    return total


@pytest.mark.parametrize("m", [1, 2, 3, 5, 6])
@pytest.mark.parametrize("eps0,delta0", [(0.3, 0.0), (0.7, 1e-3), (1.5, 0.02)])
def test_closed_form_is_the_hockey_stick_of_the_composed_pair(m, eps0, delta0):
    for epsilon in np.linspace(0.0, m * eps0 + 0.5, 17):
        brute = _brute_delta(epsilon, eps0, delta0, m)
        assert optimal_composition_delta(epsilon, eps0, delta0, m) == pytest.approx(brute, rel=1e-10, abs=1e-15)


@pytest.mark.parametrize("m,eps0,delta0", [(4, 0.5, 1e-4), (10, 0.2, 1e-6), (25, 1.0, 0.0)])
def test_theorem_3_3_at_its_grid_points(m, eps0, delta0):
    """KOV Thm. 3.3: ((m − 2i)ε₀, 1 − (1−δ₀)^m (1 − δ_i)), δ_i = Σ_{j<i} C(m,j)(e^{(m−j)ε₀} − e^{(m−2i+j)ε₀})/(1+e^{ε₀})^m."""
    for i in range(m // 2 + 1):
        delta_i = sum(math.comb(m, j) * (math.exp((m - j) * eps0) - math.exp((m - 2 * i + j) * eps0))
                      for j in range(i)) / (1 + math.exp(eps0)) ** m
        theorem = 1 - (1 - delta0) ** m * (1 - delta_i)
        assert optimal_composition_delta((m - 2 * i) * eps0, eps0, delta0, m) == pytest.approx(theorem, rel=1e-9,
                                                                                                abs=1e-15)


def test_agrees_with_dp_accounting_pld():
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld

    for eps0, delta0, m, eps in [(0.1, 1e-6, 10, 0.5), (0.5, 1e-5, 20, 3.0), (0.05, 1e-9, 41, 0.8), (1.0, 1e-8, 70, 6.0)]:
        dist = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps0, delta0),
                                           value_discretization_interval=1e-4).self_compose(m)
        assert optimal_composition_delta(eps, eps0, delta0, m) == pytest.approx(dist.get_delta_for_epsilon(eps),
                                                                               rel=1e-6, abs=1e-14)


def test_epsilon_is_the_smallest_with_delta_within_the_target():
    for eps0, delta0, m, delta in [(0.1, 1e-7, 30, 1e-5), (0.02, 1e-10, 200, 1e-7), (1.0, 1e-6, 1, 1e-6)]:
        eps = optimal_composition_epsilon(eps0, delta0, m, delta)
        assert 0 <= eps <= m * eps0
        assert optimal_composition_delta(eps, eps0, delta0, m) <= delta
        if eps > 0:
            assert optimal_composition_delta(eps * (1 - 1e-9), eps0, delta0, m) > delta


@pytest.mark.parametrize("epsilon,delta", [(1.0, 1e-8), (4.0, 1e-6), (0.25, 1e-8)])
def test_budget_is_within_the_target_maximal_and_never_below_basic_or_advanced(epsilon, delta):
    for m in (1, 2, 5, 8, 16, 24, 41, 70, 150):
        eps0, delta0 = split_budget_optimal(epsilon, delta, m)
        assert delta0 in (delta / m, delta / (2 * m))
        assert optimal_composition_delta(epsilon, eps0, delta0, m) <= delta * (1 + 1e-12)
        if eps0 > epsilon / m * (1 + 1e-9):  # an interior root: a hair more ε₀ breaks the target
            assert optimal_composition_delta(epsilon, eps0 * (1 + 1e-6), delta0, m) > delta
        # optimal composition is exact, so the other rules' budgets compose within the target too ...
        basic = mechanism_budget(epsilon, delta, m, composition="basic")
        adv = mechanism_budget(epsilon, delta, m, composition="advanced")
        for e0, d0 in (basic, adv):
            assert optimal_composition_delta(epsilon, e0, d0, m) <= delta * (1 + 1e-12)
        # ... and it never has more noise than either (the Gaussian scale sqrt(2 ln(1.25/δ₀))/ε₀)
        def scale(pair):
            return math.sqrt(2 * math.log(1.25 / pair[1])) / pair[0]

        assert scale((eps0, delta0)) <= min(scale(basic), scale(adv)) * (1 + 1e-12)


def test_the_gain_over_basic_is_negligible_below_m_star_and_large_beyond():
    """Chapter 4's numbers: at δ = 1e-8 basic composition is within 0.1 % of optimal up to 16 mechanisms."""
    m_star = advanced_wins_from(1.0, 1e-8)
    assert m_star == 41
    gain = {m: split_budget_optimal(1.0, 1e-8, m)[0] * m for m in (1, 8, 16, m_star, 70)}
    assert gain[1] == 1.0 and gain[8] == pytest.approx(1.0, abs=1e-6) and gain[16] < 1.001
    assert gain[m_star] > 1.2 * mechanism_budget(1.0, 1e-8, m_star, composition="advanced")[0] * m_star
    assert gain[70] > 1.5


def test_a_too_generous_budget_is_caught():
    """The exact δ can fail: 10 % more ε₀ than basic composition allows breaks the target at m = 3."""
    assert optimal_composition_delta(1.0, 1.1 / 3, 1e-8 / 3, 3) > 1e-8


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="n_mechanisms"):
        optimal_composition_delta(1.0, 0.1, 1e-6, 0)
    with pytest.raises(ValueError, match="n_mechanisms"):
        optimal_composition_delta(1.0, 0.1, 1e-6, 10**7)
    with pytest.raises(ValueError, match="delta0"):
        optimal_composition_delta(1.0, 0.1, 1.0, 3)
    with pytest.raises(ValueError, match="epsilon"):
        optimal_composition_delta(-1.0, 0.1, 1e-6, 3)
    with pytest.raises(ValueError, match="delta"):
        optimal_composition_epsilon(0.1, 1e-3, 10, 1e-3)  # below the 1 − (1 − δ₀)^m no ε removes
    with pytest.raises(TypeError):
        split_budget_optimal(1.0, 1e-6, 2.0)
