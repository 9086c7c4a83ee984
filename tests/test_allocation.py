"""Tests of fedbandit.accounting.allocation: basic and advanced composition of the mechanisms a user joins."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedbandit.accounting.allocation import COMPOSITIONS, advanced_wins_from, composed_guarantee, mechanism_budget
from fedbandit.accounting.composition import advanced_composition, level_budget
from fedbandit.accounting.shuffle import psco_accounting
from fedbandit.learners.concurrent_linucb import ConcurrentShuffleLinUCB
from fedbandit.mechanisms.psco import concurrent_psco, error_proxy, optimal_batch_sizes, paper_batch_sizes
from fedbandit.protocols.registry import create


@pytest.mark.parametrize("m", [1, 2, 3, 10, 40, 100, 1000])
@pytest.mark.parametrize("epsilon,delta", [(1.0, 1e-8), (0.3, 1e-6), (4.0, 1e-3)])
def test_every_rule_composes_back_within_the_target(m, epsilon, delta):
    for rule in COMPOSITIONS:
        eps0, delta0 = mechanism_budget(epsilon, delta, m, composition=rule)
        eps, dlt = composed_guarantee(eps0, delta0, m, delta, composition=rule)
        assert eps <= epsilon * (1 + 1e-9) and dlt <= delta * (1 + 1e-9), (rule, m, eps, dlt)
    # the advanced split is tight: its composition is the target exactly
    eps0, delta0 = mechanism_budget(epsilon, delta, m, composition="advanced")
    assert advanced_composition(eps0, delta0, m, delta / 2)[0] == pytest.approx(epsilon, rel=1e-9)


def test_best_is_level_budget_and_the_larger_eps0():
    for m in (1, 5, 39, 41, 200):
        best = mechanism_budget(1.0, 1e-8, m)
        assert best == level_budget(1.0, 1e-8, m)
        basic = mechanism_budget(1.0, 1e-8, m, composition="basic")
        adv = mechanism_budget(1.0, 1e-8, m, composition="advanced")
        assert best[0] == max(basic[0], adv[0])


def test_advanced_wins_beyond_about_2_ln_2_over_delta():
    """Advanced composition has the larger ε₀ exactly from m* on; m* ≈ 2 ln(2/δ) for small ε."""
    for delta in (1e-8, 1e-6):
        m_star = advanced_wins_from(1.0, delta)
        basic = lambda m: 1.0 / m  # noqa: E731
        assert mechanism_budget(1.0, delta, m_star, composition="advanced")[0] > basic(m_star)
        assert mechanism_budget(1.0, delta, m_star - 1, composition="advanced")[0] <= basic(m_star - 1)
        assert abs(m_star - 2 * math.log(2 / delta)) < 0.25 * 2 * math.log(2 / delta)


def test_a_too_generous_split_is_caught():
    """The check can fail: 5 % more ε₀ than the advanced split composes beyond the target."""
    eps0, delta0 = mechanism_budget(1.0, 1e-8, 50, composition="advanced")
    assert composed_guarantee(1.05 * eps0, delta0, 50, 1e-8, composition="advanced")[0] > 1.0
    assert composed_guarantee(1.0 / 50 * 1.05, 1e-8 / 50, 50, 1e-8, composition="basic")[0] > 1.0


def test_psco_with_each_composition_is_within_the_target():
    n = 200_000
    for rule in COMPOSITIONS:
        for k in (1, 3):
            sizes = optimal_batch_sizes(n, k, 1.0, 1e-8, composition=rule)
            acc = psco_accounting(n, 1.0, 1e-8, sizes, composition=rule)
            assert acc["composition"] == rule
            eps, dlt = acc["guarantee"]
            assert eps <= 1.0 + 1e-9 and dlt <= 1e-8 * (1 + 1e-9)
            assert all(row["certified_delta"] <= row["delta0"] * (1 + 1e-12) for row in acc["levels"])
            rel = concurrent_psco(np.zeros((1, n), dtype=np.uint8), k, 1.0, 1e-8, np.random.default_rng(0),
                                  batch_sizes=sizes, composition=rule)
            assert rel.info["composition"] == rule
            assert rel.info["epsilon0"] == pytest.approx(mechanism_budget(1.0, 1e-8, k, composition=rule)[0])
    # at k = 3 < 2 ln(2/δ) basic composition gives less noise, so a smaller error proxy
    assert error_proxy("concurrent", n, 1.0, 1e-8, k=3, composition="basic") < error_proxy(
        "concurrent", n, 1.0, 1e-8, k=3, composition="advanced")
    assert error_proxy("concurrent", n, 1.0, 1e-8, k=3) == error_proxy("concurrent", n, 1.0, 1e-8, k=3,
                                                                        composition="basic")


def test_protocol_composition_option():
    """The concurrent-shuffle protocol splits (ε, δ) over its k·D mechanisms by the chosen rule; all verified."""
    eps0 = {}
    for rule in COMPOSITIONS:
        proto = create("concurrent-shuffle", epsilon=2.0, delta=1e-6, k="log", composition=rule)
        ConcurrentShuffleLinUCB(proto, n_users=4096, dim=2, min_period=16)
        cal = proto.calibration()
        m = cal["mechanisms_per_user"]
        assert cal["composition"] == rule
        assert (cal["epsilon0"], cal["delta0"]) == mechanism_budget(2.0, 1e-6, m, composition=rule)
        acc = proto.accounting()
        assert acc.status == "verified" and acc.epsilon <= 2.0 + 1e-9 and acc.delta <= 1e-6 * (1 + 1e-9)
        eps0[rule] = cal["epsilon0"]
    # the dyadic schedule on blocks of 16 users has 9 levels: k·D = 45 mechanisms > 2 ln(2/δ) ≈ 29
    assert eps0["advanced"] > eps0["basic"] and eps0["best"] == eps0["advanced"]
    with pytest.raises(ValueError, match="composition"):
        create("concurrent-shuffle", epsilon=2.0, delta=1e-6, k=2, composition="optimal")


def test_paper_batch_sizes():
    """b_i ≈ n^{(2k+1−2i)/(2k+1)}, nested, within n."""
    for n in (10**4, 10**6, 10**8):
        for k in (1, 2, 3, 4):
            sizes = paper_batch_sizes(n, k)
            assert len(sizes) == k and sizes[0] <= n
            assert all(a % b == 0 and a > b for a, b in zip(sizes, sizes[1:]))
            for i, b in enumerate(sizes, start=1):
                target = n ** ((2 * k + 1 - 2 * i) / (2 * k + 1))
                assert 0.3 < b / target < 3.0, (n, k, sizes)
    with pytest.raises(ValueError, match="k"):
        paper_batch_sizes(100, 9)
