"""Every calibration rule checked against its paper's formula, written out here (not taken from the code).

Sources: Zhou & Chowdhury 2023 (silo-level LDP Thm. 6.1, amplification Thm. 6.3, λ and β of
Algorithm 1 / Lemma 6.7, the authors' code), Dubey & Pentland 2020 (DP20's σ and m, the
Shariff–Sheffet regularizer bound), Cheu, Joseph, Mao & Peng 2021 (the vector sum's g, b,
p), Chan, Shi & Song 2011 (the counters' Laplace scales), Kairouz, Liu & Steinke 2021 (the
DDG's τ, Δ₂, Theorem 1, Proposition 14, Theorem 11, Proposition 13 and its worked example),
Canonne, Kamath & Steinke 2020 (the zCDP and RDP conversions).  Labels: [paper] the
papers' text, [recalled] the book's recollection of a display missing from the text,
[authors' code] the authors' experiment code.

Also: the values the loop references (``tests/reference_*.py``) take from the learner
under test (λ, β_t, σ₀, DP20's regularizer shift) are checked here independently, so a
wrong calibration cannot pass by being fed to both sides.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

REL = 1e-12  # the formulas are evaluated in the same float arithmetic: agreement to rounding

# ---------------------------------------------------------------------------------------
# Independent helpers: the tree depth and the [CKS20] conversions
# ---------------------------------------------------------------------------------------


def kappa(K):
    """κ = ⌊log₂ K⌋ + 1: the levels of a binary tree over K leaves (Zhou & Chowdhury Alg. 2)."""
    return int(math.floor(math.log2(K))) + 1


def cks_zcdp_to_dp(rho, delta):
    """[CKS20] Prop. 12: ρ-zCDP ⇒ (ε, δ)-DP, ε = inf_{α>1} ρα + log(1/(αδ))/(α−1) + log(1 − 1/α)."""

    def f(log_am1):
        a = 1.0 + math.exp(log_am1)
        return rho * a + math.log(1.0 / (a * delta)) / (a - 1.0) + math.log(1.0 - 1.0 / a)

    res = optimize.minimize_scalar(f, bounds=(-20.0, 20.0), method="bounded", options={"xatol": 1e-12})
    return float(res.fun)


def cks_dp_to_zcdp(epsilon, delta):
    """The ρ at which :func:`cks_zcdp_to_dp` equals ε (ε increases in ρ)."""
    return math.exp(optimize.brentq(lambda u: cks_zcdp_to_dp(math.exp(u), delta) - epsilon, -60, 20, xtol=1e-14))


def cks_rdp_to_dp(orders, rdp, delta):
    """[CKS20] Prop. 12 for RDP: ε = min_α rdp(α) + log((α − 1)/α) − (log δ + log α)/(α − 1)."""
    a = np.asarray(orders, dtype=float)
    return float(np.min(np.asarray(rdp) + np.log((a - 1) / a) - (math.log(delta) + np.log(a)) / (a - 1)))


def test_independent_cks_helpers_match_the_simple_bound_ordering():
    # the optimal conversion is below the simple bound ρ + 2 sqrt(ρ log(1/δ)) and positive
    for rho, delta in [(0.01, 1e-5), (0.5, 1e-3), (3.0, 1e-6)]:
        eps = cks_zcdp_to_dp(rho, delta)
        assert 0 < eps < rho + 2 * math.sqrt(rho * math.log(1 / delta))
        assert cks_dp_to_zcdp(eps, delta) == pytest.approx(rho, rel=1e-8)


# ---------------------------------------------------------------------------------------
# The confidence radius β_t and the regularizer λ (Zhou & Chowdhury)
# ---------------------------------------------------------------------------------------

RADIUS_CASES = [
    dict(t=1, lam=1.0, dim=2, n_agents=1, alpha=0.01, noise_std=0.5, param_bound=None, feature_bound=1.0, scale=1.0),
    dict(t=250, lam=10.0, dim=10, n_agents=100, alpha=0.01, noise_std=0.5, param_bound=1.0, feature_bound=1.0,
         scale=0.1),
    dict(t=np.array([1, 10, 1000]), lam=37.5, dim=5, n_agents=4, alpha=0.05, noise_std=0.1, param_bound=2.0,
         feature_bound=0.5, scale=2.0),
]


def beta_authors(t, lam, dim, n_agents, alpha, noise_std, param_bound, feature_bound, scale):
    """[authors' code] width = crs (sqrt(λ) S + R sqrt(d log(1 + t M L²/(dλ)) + log(1/α))), S = sqrt(d) by default."""
    S = math.sqrt(dim) if param_bound is None else param_bound
    t = np.asarray(t, dtype=float)
    return scale * (math.sqrt(lam) * S + noise_std * np.sqrt(dim * np.log(1 + t * n_agents * feature_bound**2 / (dim * lam))
                                                             + math.log(1 / alpha)))


def beta_paper(t, lam, dim, n_agents, alpha, noise_std, param_bound, feature_bound, scale):
    """[recalled] β_t = R sqrt(2 log(2/α) + d log(1 + M t L²/(dλ))) + sqrt(λ) S."""
    S = math.sqrt(dim) if param_bound is None else param_bound
    t = np.asarray(t, dtype=float)
    return scale * (noise_std * np.sqrt(2 * math.log(2 / alpha) + dim * np.log(1 + n_agents * t * feature_bound**2
                                                                                  / (dim * lam)))
                    + math.sqrt(lam) * S)


@pytest.mark.parametrize("case", RADIUS_CASES)
@pytest.mark.parametrize("rule, formula", [("authors", beta_authors), ("paper", beta_paper)])
def test_confidence_radius_is_the_formula(case, rule, formula):
    from fedbandit.theory.linear import confidence_radius

    got = confidence_radius(case["t"], case["lam"], case["dim"], case["n_agents"], case["alpha"],
                            noise_std=case["noise_std"], param_bound=case["param_bound"],
                            feature_bound=case["feature_bound"], rule=rule, scale=case["scale"])
    np.testing.assert_allclose(got, formula(**case), rtol=REL)


@pytest.mark.parametrize("rule", ["authors", "paper"])
def test_confidence_radius_grows_with_the_reward_noise(rule):
    """β_t increases in R (the noise term enters with a plus sign) and in t; it is sqrt(λ)S at R = 0."""
    from fedbandit.theory.linear import confidence_radius

    radii = [confidence_radius(100, 4.0, 3, 2, 0.01, noise_std=r, rule=rule) for r in (0.0, 0.1, 0.5, 1.0)]
    assert radii[0] == pytest.approx(math.sqrt(4.0) * math.sqrt(3))
    assert all(a < b for a, b in zip(radii, radii[1:]))
    ts = confidence_radius(np.array([1, 10, 100]), 4.0, 3, 2, 0.01, noise_std=0.5, rule=rule)
    assert np.all(np.diff(ts) > 0)


@pytest.mark.parametrize("sigma, dim, K, alpha, lam_min", [(0.0, 3, 8, 0.01, 1.0), (2.5, 10, 400, 0.01, 10.0),
                                                          (40.0, 5, 1, 0.1, 1.0), (1e-3, 2, 1000, 0.01, 1.0)])
def test_regularizer_lambda_is_the_formula(sigma, dim, K, alpha, lam_min):
    from fedbandit.theory.linear import regularizer_lambda

    # [authors' code] λ = max(λ_min, σ (sqrt(κ + log(1/α)) + sqrt(d)))
    want = max(lam_min, sigma * (math.sqrt(kappa(K) + math.log(1 / alpha)) + math.sqrt(dim)))
    assert regularizer_lambda(sigma, dim, K, alpha, lam_min=lam_min) == pytest.approx(want, rel=REL)
    # [recalled] λ = max(λ_min, σ (sqrt(d) + sqrt(log(T/(Bα)))))
    T, B = 25 * K, 25
    want = max(lam_min, sigma * (math.sqrt(dim) + math.sqrt(math.log(T / (B * alpha)))))
    got = regularizer_lambda(sigma, dim, K, alpha, rule="paper", horizon=T, batch_size=B, lam_min=lam_min)
    assert got == pytest.approx(want, rel=REL)


# ---------------------------------------------------------------------------------------
# fedbandit/accounting/calibration.py
# ---------------------------------------------------------------------------------------

TREE_CASES = [(1.0, 1e-5, 8), (0.2, 0.1, 400), (5.0, 1e-4, 1), (1e-3, 1e-4, 100)]


@pytest.mark.parametrize("epsilon, delta, K", TREE_CASES)
@pytest.mark.parametrize("sensitivity", [1.0, 2.0])
def test_ldp_sigma0_rules(epsilon, delta, K, sensitivity):
    from fedbandit.accounting.calibration import central_sigma, ldp_sigma0

    k = kappa(K)
    # [paper] Thm. 6.1: σ₀² = 8κ(log(2/δ) + ε)/ε²
    paper = sensitivity * math.sqrt(8 * k * (math.log(2 / delta) + epsilon)) / epsilon
    # [authors' code] σ₀ = L sqrt(κ(log(1/δ) + ε))/ε
    authors = sensitivity * math.sqrt(k * (math.log(1 / delta) + epsilon)) / epsilon
    # [derived] κ node releases of two statistics, each sensitivity once: ρ = κ/σ₀² at the CKS20 ρ of (ε, δ)
    zcdp = sensitivity * math.sqrt(k / cks_dp_to_zcdp(epsilon, delta))
    for rule, want in (("paper", paper), ("authors", authors), ("zcdp", zcdp)):
        got = ldp_sigma0(epsilon, delta, K, calibration=rule, sensitivity=sensitivity)
        assert got == pytest.approx(want, rel=REL if rule != "zcdp" else 1e-7), rule
        if sensitivity == 1.0:
            assert central_sigma(epsilon, delta, K, calibration=rule) == got


@pytest.mark.parametrize("epsilon, delta, K", TREE_CASES)
def test_ldp_total_variance_is_m_kappa_sigma0_squared(epsilon, delta, K):
    from fedbandit.accounting.calibration import ldp_total_variance

    M = 7
    sigma0_sq = 8 * kappa(K) * (math.log(2 / delta) + epsilon) / epsilon**2
    # [paper] σ² = 8 M κ² (log(2/δ) + ε)/ε²
    assert ldp_total_variance(epsilon, delta, K, M) == pytest.approx(M * kappa(K) * sigma0_sq, rel=REL)
    assert ldp_total_variance(epsilon, delta, K, M) == pytest.approx(
        8 * M * kappa(K) ** 2 * (math.log(2 / delta) + epsilon) / epsilon**2, rel=REL)


@pytest.mark.parametrize("T, m", [(1, 1), (2, 2), (3, 3), (4, 3), (5, 4), (1024, 11), (1025, 12), (10_000, 15)])
def test_dp20_m(T, m):
    from fedbandit.accounting.calibration import dp20_m

    assert dp20_m(T) == m  # m = 1 + ⌈log₂ T⌉ [recalled]


@pytest.mark.parametrize("epsilon, delta, T, L", [(1.0, 1e-5, 100, 1.0), (5.0, 0.1, 40, 2.0), (0.1, 1e-4, 10_000, 1.0)])
def test_dp20_sigma(epsilon, delta, T, L):
    from fedbandit.accounting.calibration import dp20_sigma

    m = 1 + math.ceil(math.log2(T))
    # [recalled] σ² = 16 m L² log²(1/δ)/ε²
    assert dp20_sigma(epsilon, delta, T, L) == pytest.approx(math.sqrt(16 * m * L**2 * math.log(1 / delta) ** 2
                                                                       / epsilon**2), rel=REL)


@pytest.mark.parametrize("epsilon, delta, K, T, M", [(1.0, 1e-3, 8, 200, 300), (0.5, 1e-4, 400, 10_000, 200)])
@pytest.mark.parametrize("parties", [1, 4])
def test_gaussian_tree_sigma0_every_rule(epsilon, delta, K, T, M, parties):
    from fedbandit.accounting.calibration import TREE_SIGMA_RULES, gaussian_tree_sigma0

    k = kappa(K)
    m = 1 + math.ceil(math.log2(T))
    dp20 = math.sqrt(16 * m) * math.log(1 / delta) / epsilon
    want = {
        "paper": math.sqrt(8 * k * (math.log(2 / delta) + epsilon)) / epsilon / math.sqrt(parties),
        "authors": math.sqrt(k * (math.log(1 / delta) + epsilon)) / epsilon / math.sqrt(parties),
        "zcdp": math.sqrt(k / cks_dp_to_zcdp(epsilon, delta)) / math.sqrt(parties),
        # [authors' code] σ₀ = L sqrt(κ log(1/δ) log(1 + κ/(Tδ)) log(Mκ/δ))/(ε sqrt M)
        "amplification-authors": math.sqrt(k * math.log(1 / delta) * math.log(1 + k / (T * delta))
                                           * math.log(M * k / delta)) / (epsilon * math.sqrt(M)),
        # [recalled] σ₀² = κ log(1/δ) log(κ/(δT)) log(Mκ/δ)/(ε² M)   (κ/(δT) > 1 here)
        "amplification-recalled": math.sqrt(k * math.log(1 / delta) * math.log(k / (delta * T))
                                            * math.log(M * k / delta) / (epsilon**2 * M)),
        # [paper] "roughly 1/M of the LDP noise": σ₀² = 8κ(log(2/δ) + ε)/(ε² M)
        "amplification-ideal": math.sqrt(8 * k * (math.log(2 / delta) + epsilon) / M) / epsilon,
        "dp20": dp20,
        "dp20-claimed": dp20 / math.sqrt(M),
    }
    assert set(want) == set(TREE_SIGMA_RULES)
    for rule, value in want.items():
        got = gaussian_tree_sigma0(rule, epsilon, delta, n_batches=K, horizon=T, n_agents=M, parties=parties,
                                   force=True)
        assert got == pytest.approx(value, rel=REL if rule != "zcdp" else 1e-7), rule


@pytest.mark.parametrize("epsilon, delta, n, D", [(1.0, 0.1, 100, 5), (0.2, 0.1, 25, 10), (15.0, 1e-3, 10_000, 3),
                                                  (1.0, 0.1, 4, 2)])
def test_vector_sum_parameters(epsilon, delta, n, D):
    from fedbandit.accounting.calibration import vector_sum_parameters

    # [recalled] CJMP21: g = max(⌈2 sqrt n⌉, D, 4), b = ⌈24·10⁴ g² log²(4D²/δ)/(ε² n)⌉, p = 1/4
    g = max(math.ceil(2 * math.sqrt(n)), D, 4)
    b = math.ceil(24e4 * g**2 * math.log(4 * D**2 / delta) ** 2 / (epsilon**2 * n))
    assert vector_sum_parameters(epsilon, delta, n, D) == (g, b, 0.25)
    g2 = g + 3
    assert vector_sum_parameters(epsilon, delta, n, D, g=g2, constant=1.0) == (
        g2, math.ceil(g2**2 * math.log(4 * D**2 / delta) ** 2 / (epsilon**2 * n)), 0.25)


@pytest.mark.parametrize("epsilon, s, releases", [(1.0, 1.0, 1), (0.5, 2.0, 11), (3.0, 0.5, 2)])
def test_laplace_counter_scale(epsilon, s, releases):
    from fedbandit.accounting.calibration import laplace_counter_scale

    # each item in `releases` Laplace releases of scale b: (releases·s/b)-DP by basic composition
    assert laplace_counter_scale(epsilon, s, releases=releases) == pytest.approx(releases * s / epsilon, rel=REL)
    eps = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(laplace_counter_scale(eps, s, releases=releases), releases * s / eps, rtol=REL)


# ---------------------------------------------------------------------------------------
# fedbandit/accounting/counting.py (Chan, Shi & Song 2011)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon, s", [(1.0, 1.0), (0.3, 2.0)])
def test_counter_scales(epsilon, s):
    from fedbandit.accounting.counting import binary_counter_scale, hybrid_counter_scales, per_item_counter_scale

    # hybrid: ε/2 for the logarithmic part (one release per item: Lap(2s/ε)) and ε/2 for each
    # interval's binary tree (per node 2s/ε, times the k nodes of an item of interval k)
    assert hybrid_counter_scales(epsilon, s) == pytest.approx((2 * s / epsilon, 2 * s / epsilon), rel=REL)
    for T in (1, 2, 7, 8, 1000):
        L = len(bin(T)) - 2  # the tree over T items has ⌊log₂ T⌋ + 1 levels
        assert binary_counter_scale(epsilon, T, s) == pytest.approx(L * s / epsilon, rel=REL)
    assert per_item_counter_scale(epsilon, s) == pytest.approx(s / epsilon, rel=REL)


def test_account_pure_reports_the_laplace_epsilon_against_a_pure_target():
    from fedbandit.accounting import LaplaceEvent
    from fedbandit.accounting.counting import account_pure

    acc = account_pure(LaplaceEvent(sensitivity=2.0, scale=4.0), target_epsilon=0.5)
    assert acc.epsilon == pytest.approx(2.0 / 4.0) and acc.delta == 0.0 and acc.target_delta == 0.0
    assert acc.status == "verified"
    assert account_pure(LaplaceEvent(sensitivity=2.0, scale=4.0), target_epsilon=0.4).status == "invalid"


# ---------------------------------------------------------------------------------------
# fedbandit/accounting/ddg.py (Kairouz, Liu & Steinke 2021)
# ---------------------------------------------------------------------------------------


def tau(s, n):
    """[recalled, Thm. 1] τ = 10 Σ_{k=1}^{n−1} exp(−2π² s² k/(k+1)), s = σ/γ."""
    return 10.0 * sum(math.exp(-2 * math.pi**2 * s * s * k / (k + 1)) for k in range(1, n))


def delta2(c, gamma, d, beta):
    """[recalled] Δ₂² = min{c² + γ²d/4 + sqrt(2 log(1/β)) γ (c + γ sqrt(d)/2), (c + γ sqrt d)²} (β > 0)."""
    worst = (c + gamma * math.sqrt(d)) ** 2
    if beta == 0:
        return math.sqrt(worst)
    return math.sqrt(min(c * c + gamma**2 * d / 4 + math.sqrt(2 * math.log(1 / beta)) * gamma * (c + gamma * math.sqrt(d) / 2),
                         worst))


DDG_CASES = [(0.3, 0.05, 16, 8, 0.6), (2.0, 0.5, 256, 100, math.exp(-0.5)), (1.0, 0.01, 4, 2, 0.0),
             (0.05, 0.02, 64, 1000, 0.3)]  # (sigma, gamma, d, n, beta), c = 1


@pytest.mark.parametrize("sigma, gamma, d, n, beta", DDG_CASES)
def test_ddg_tau_delta2_and_theorem1(sigma, gamma, d, n, beta):
    from fedbandit.accounting.ddg import ddg_delta2, ddg_tau, ddg_zcdp_epsilon

    assert ddg_tau(sigma / gamma, n) == pytest.approx(tau(sigma / gamma, n), rel=1e-10, abs=1e-300)
    D2 = delta2(1.0, gamma, d, beta)
    assert ddg_delta2(1.0, gamma, d, beta) == pytest.approx(D2, rel=REL)
    t = tau(sigma / gamma, n)
    # [recalled, Thm. 1] ε = min{sqrt(Δ₂²/(nσ²) + 2τd), Δ₂/(sqrt(n) σ) + τ sqrt(d)}
    want = min(math.sqrt(D2**2 / (n * sigma**2) + 2 * t * d), D2 / (math.sqrt(n) * sigma) + t * math.sqrt(d))
    assert ddg_zcdp_epsilon(D2, sigma, gamma, n, d) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("sigma, gamma, d, n, beta", DDG_CASES)
def test_ddg_rdp_is_proposition_14(sigma, gamma, d, n, beta):
    from fedbandit.accounting.ddg import ddg_rdp

    D2 = delta2(1.0, gamma, d, beta)
    D1 = math.sqrt(d) * D2
    t = tau(sigma / gamma, n)
    a = np.array([1.5, 2.0, 8.0, 64.0])
    A = D2**2 / (n * sigma**2)
    want = np.minimum.reduce([a / 2 * A + t * d,
                              a / 2 * (A + 2 * t * D1 / (math.sqrt(n) * sigma) + t**2 * d),
                              a / 2 * (D2 / (math.sqrt(n) * sigma) + t * math.sqrt(d)) ** 2])
    np.testing.assert_allclose(ddg_rdp(a, D2, sigma, gamma, n, d), want, rtol=1e-10)


@pytest.mark.parametrize("sigma, gamma, d, n, beta", DDG_CASES[:2])
@pytest.mark.parametrize("steps", [1, 10])
def test_ddg_epsilon_both_methods_are_the_cks_conversions(sigma, gamma, d, n, beta, steps):
    from fedbandit.accounting.ddg import RDP_ORDERS, ddg_epsilon

    delta = 1e-5
    D2 = delta2(1.0, gamma, d, beta)
    t = tau(sigma / gamma, n)
    eps1 = min(math.sqrt(D2**2 / (n * sigma**2) + 2 * t * d), D2 / (math.sqrt(n) * sigma) + t * math.sqrt(d))
    got = ddg_epsilon(sigma, c=1.0, gamma=gamma, beta=beta, n=n, d=d, delta=delta, steps=steps, method="zcdp")
    assert got == pytest.approx(cks_zcdp_to_dp(steps * eps1**2 / 2, delta), rel=1e-6)
    a = RDP_ORDERS
    A = D2**2 / (n * sigma**2)
    rdp = steps * np.minimum.reduce([a / 2 * A + t * d,
                                     a / 2 * (A + 2 * t * math.sqrt(d) * D2 / (math.sqrt(n) * sigma) + t**2 * d),
                                     a / 2 * (D2 / (math.sqrt(n) * sigma) + t * math.sqrt(d)) ** 2])
    got = ddg_epsilon(sigma, c=1.0, gamma=gamma, beta=beta, n=n, d=d, delta=delta, steps=steps, method="rdp")
    assert got == pytest.approx(cks_rdp_to_dp(a, rdp, delta), rel=1e-9)


@pytest.mark.parametrize("target", [0.5, 2.0, 6.0])
@pytest.mark.parametrize("method", ["rdp", "zcdp"])
def test_ddg_sigma_for_epsilon_is_the_smallest_sigma_meeting_the_target(target, method):
    from fedbandit.accounting.ddg import ddg_epsilon, ddg_sigma_for_epsilon

    kw = dict(c=1.0, gamma=0.01, beta=math.exp(-0.5), n=100, d=256, delta=1e-5, method=method)
    s = ddg_sigma_for_epsilon(target, **kw)
    assert ddg_epsilon(s, **kw) == pytest.approx(target, rel=1e-8)
    assert ddg_epsilon(s * 0.999, **kw) > target  # ε decreases in σ: a smaller σ misses the target


def test_single_dg_sum_epsilon_is_proposition_13_and_the_worked_example():
    from fedbandit.accounting.ddg import single_dg_sum_epsilon

    for sens, sigma, n in [(1.0, 1.0, 10_000), (2.0, 0.5, 30), (1.0, 3.0, 1)]:
        t = tau(sigma, n)  # grid step 1
        want = min(math.sqrt(sens**2 / (n * sigma**2) + 2 * t), sens / (math.sqrt(n) * sigma) + t)
        assert single_dg_sum_epsilon(sens, sigma, n) == pytest.approx(want, rel=1e-10)
    # [paper] "if σ = Δ = 1 and n = 10^4, then ε < 0.02"
    assert single_dg_sum_epsilon(1.0, 1.0, 10_000) < 0.02


def test_sum_closeness_bound_is_theorem_11():
    from fedbandit.accounting.ddg import sum_closeness_bound

    for s2, t2 in [(3.0, 3.0), (1.0, 0.25), (10.0, 0.2)]:
        assert sum_closeness_bound(s2, t2) == pytest.approx(5 * math.exp(-2 * math.pi**2 / (1 / s2 + 1 / t2)), rel=REL)
    assert sum_closeness_bound(3.0, 3.0) <= 1e-12  # [paper] "≤ 1e-12 at σ² = τ² = 3"
    with pytest.raises(ValueError, match="8"):
        sum_closeness_bound(0.1, 0.1)  # 1/σ² + 1/τ² = 20 > 8: outside the theorem


@pytest.mark.parametrize("bits, k, n, d, norm_growth", [(16, 3.0, 100, 250, "conservative"),
                                                        (12, 2.0, 10, 16, "optimistic"), (20, 4.0, 1000, 5, "conservative")])
def test_ddg_params_meets_the_range_equation(bits, k, n, d, norm_growth):
    """[authors' code] 2^B γ = 2k sqrt(c² n_f/d' + (γ²/4 + σ(γ)²) n), n_f = n² (conservative) or n."""
    from fedbandit.accounting.ddg import ddg_params, ddg_sigma_for_epsilon

    c, eps, delta = 1.0, 2.0, 1e-5
    p = ddg_params(bits, k, n, d, c, eps, delta, norm_growth=norm_growth)
    d_pad = 1 << (d - 1).bit_length()
    assert p.d_pad == d_pad
    n_f = n**2 if norm_growth == "conservative" else n
    lhs = 2**bits * p.gamma
    rhs = 2 * k * math.sqrt(c * c * n_f / d_pad + (p.gamma**2 / 4 + p.sigma**2) * n)
    assert lhs == pytest.approx(rhs, rel=1e-8)
    assert p.sigma == pytest.approx(ddg_sigma_for_epsilon(eps, c=c, gamma=p.gamma, beta=p.beta, n=n, d=d_pad,
                                                          delta=delta), rel=1e-9)
    assert p.delta2 == pytest.approx(delta2(c, p.gamma, d_pad, p.beta), rel=REL)


def test_ddg_params_from_gamma_computes_epsilon():
    from fedbandit.accounting.ddg import ddg_epsilon, ddg_params_from_gamma

    p = ddg_params_from_gamma(16, 0.01, 0.5, 50, 30, 1.0, 1e-5)
    assert p.d_pad == 32 and p.delta2 == pytest.approx(delta2(1.0, 0.01, 32, math.exp(-0.5)), rel=REL)
    assert p.epsilon == ddg_epsilon(0.5, c=1.0, gamma=0.01, beta=math.exp(-0.5), n=50, d=32, delta=1e-5)


# ---------------------------------------------------------------------------------------
# What the loop references receive from the learner under test, checked independently
# ---------------------------------------------------------------------------------------


def test_fixed_batch_learner_lambda_beta_and_sigma0_are_the_formulas():
    """tests/reference_fixed_batch.py gets λ, β_t and σ₀ from the learner: here they are recomputed."""
    from fedbandit.learners import FixedBatchFedLinUCB
    from fedbandit.protocols import create

    M, T, B, d, eps, delta, alpha = 4, 200, 10, 3, 1.0, 1e-3, 0.01
    K = T // B
    learner = FixedBatchFedLinUCB(create("silo-ldp", epsilon=eps, delta=delta, calibration="paper"), horizon=T,
                                  batch_size=B, n_agents=M, dim=d, alpha=alpha)
    # Thm. 6.1 per agent and node; adding or removing one user moves x y by L·Y = 1 and x xᵀ by L² = 1
    sigma0 = math.sqrt(8 * kappa(K) * (math.log(2 / delta) + eps)) / eps
    assert learner.protocol.relation == "add-remove"
    assert learner.protocol.node_noise_std() == pytest.approx(math.sqrt(M) * sigma0, rel=REL)
    sigma = math.sqrt(M * kappa(K)) * sigma0  # the server's total noise std over the tree
    assert learner.protocol.server_noise_std() == pytest.approx(sigma, rel=REL)
    lam = max(math.sqrt(M), sigma * (math.sqrt(kappa(K) + math.log(1 / alpha)) + math.sqrt(d)))
    assert learner.lam == pytest.approx(lam, rel=REL)
    t = np.array([1, 50, 200])
    want = math.sqrt(lam) * math.sqrt(d) + 0.5 * np.sqrt(d * np.log(1 + t * M / (d * lam)) + math.log(1 / alpha))
    np.testing.assert_allclose(learner.beta(t), want, rtol=REL)


def test_dp20_learner_sigma_shift_and_beta_are_the_formulas():
    """tests/reference_dp20.py gets σ₀, λ₀ and β_t from FedUCB: here they are recomputed [recalled]."""
    from fedbandit.learners import FedUCB
    from fedbandit.protocols import create

    M, T, d, eps, delta, alpha, lam, R, S = 3, 40, 2, 5.0, 0.1, 0.01, 1.0, 0.5, 1.0
    learner = FedUCB(create("dp20", epsilon=eps, delta=delta), n_agents=M, dim=d, horizon=T, schedule="fixed",
                     batch_size=4, alpha=alpha, lam=lam, noise_bound=R, param_bound=S)
    m = 1 + math.ceil(math.log2(T))
    sigma0 = math.sqrt(16 * m) * math.log(1 / delta) / eps  # DP20's per-silo σ
    assert learner.protocol.calibration()["sigma0"] == pytest.approx(sigma0, rel=REL)
    s = math.sqrt(M) * sigma0  # the server's per-entry node noise
    assert learner.total_sigma == pytest.approx(s, rel=REL)
    b = math.sqrt(m) * s * (4 * math.sqrt(d) + 2 * math.log(2 * T / alpha))  # Shariff–Sheffet norm bound
    assert learner.lam0 == pytest.approx(lam + 2 * b, rel=REL)
    rho_min, rho_max = lam + b, lam + 3 * b
    gamma = math.sqrt(m) * s * (math.sqrt(d) + math.sqrt(2 * math.log(2 * T / alpha))) / math.sqrt(rho_min)
    t = np.array([1.0, 10.0, 40.0])
    want = (R * np.sqrt(2 * math.log(2 / alpha) + d * np.log(rho_max / rho_min + t * M / (d * rho_min)))
            + S * math.sqrt(rho_max) + gamma)
    np.testing.assert_allclose(learner.beta(t), want, rtol=REL)


def test_concurrent_linucb_parameters_are_the_formulas():
    """Shariff–Sheffet's (ρ_min, ρ_max, γ) for the concurrent-shuffle learner's central baseline [recalled]."""
    from fedbandit.learners.concurrent_linucb import linucb_parameters
    from fedbandit.protocols import create

    n, d, alpha, eps, delta = 64, 3, 0.01, 1.0, 1e-3
    p = create("central", epsilon=eps, delta=delta, calibration="zcdp", relation="replace")
    p.configure(n_agents=1, dim=d, n_batches=n, batch_size=1)
    sigma = p.server_noise_std()
    # the central tree's total std over κ levels; replacing one user's record moves x y by at most 2LY and
    # x xᵀ by sqrt(2) L² (Frobenius): the node noise is calibrated to the larger, 2 (L = Y = 1)
    sigma0 = 2.0 * math.sqrt(kappa(n) / cks_dp_to_zcdp(eps, delta))
    assert sigma == pytest.approx(math.sqrt(kappa(n)) * sigma0, rel=1e-7)
    got = linucb_parameters(p, n, d, alpha=alpha)
    tail = math.sqrt(2 * math.log(2 * n / alpha))
    nu = sigma * (2 * math.sqrt(d) + tail)
    lam = max(1.0, 2 * nu)
    assert got["lam"] == pytest.approx(lam, rel=REL)
    assert (got["rho_min"], got["rho_max"]) == pytest.approx((lam - nu, lam + nu), rel=REL)
    assert got["gamma"] == pytest.approx(sigma * (math.sqrt(d) + tail) / math.sqrt(lam - nu), rel=REL)


# ---------------------------------------------------------------------------------------
# Validity regions of the amplification bounds (fedbandit/accounting/amplification.py)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("delta", [1e-4, 1e-6, 0.1])
def test_zhou_chowdhury_validity_threshold_is_16_ln_4_over_delta(delta):
    """M ≥ 16 ln(4/δ) [derived from FMT22's clone argument]: checked on both sides of the threshold.

    The threshold lies 16 ln 4 ≈ 22 agents above 16 ln(1/δ), so agent counts in between tell
    the two constants apart (the constant 16 ln(1/δ) passed every other test).
    """
    from fedbandit.accounting import AmplificationValidityError
    from fedbandit.accounting.amplification import zc_amplification_sigma0, zc_amplification_validity

    need = 16 * math.log(4 / delta)
    wrong = 16 * math.log(1 / delta)
    between = math.floor(need) - 1  # above 16 ln(1/δ), below 16 ln(4/δ)
    assert wrong < between < need
    conds = {c.statement: c.holds for c in zc_amplification_validity(0.5, delta, between, 8, 100)}
    assert conds["M ≥ 16 ln(4/δ)"] is False
    with pytest.raises(AmplificationValidityError, match="16 ln"):
        zc_amplification_sigma0(0.5, delta, between, 8, 100)
    conds = {c.statement: c.holds for c in zc_amplification_validity(0.5, delta, math.ceil(need), 8, 100)}
    assert conds["M ≥ 16 ln(4/δ)"] is True


@pytest.mark.parametrize("n, delta", [(10_000, 1e-6), (1000, 1e-3), (10**6, 1e-8)])
def test_fmt22_closed_form_validity_is_epsilon0_below_ln_n_over_16_ln_4_over_delta(n, delta):
    """[recalled] valid only if ε₀ < ln(n / (16 ln(4/δ))): tested just below and just above, and between the
    true bound and the one with ln(1/δ)."""
    from fedbandit.accounting import AmplificationValidityError
    from fedbandit.accounting.amplification import fmt22_closed_form_epsilon, fmt22_closed_form_validity

    bound = math.log(n / (16 * math.log(4 / delta)))
    wrong = math.log(n / (16 * math.log(1 / delta)))
    assert bound < wrong
    assert fmt22_closed_form_validity(bound * 0.999, n, delta)[0].holds
    for eps0 in (bound * 1.001, 0.5 * (bound + wrong)):
        assert not fmt22_closed_form_validity(eps0, n, delta)[0].holds
        with pytest.raises(AmplificationValidityError):
            fmt22_closed_form_epsilon(eps0, n, delta)


def test_fmt22_closed_form_is_invalid_at_the_papers_small_example():
    """[recalled] "at n = 100 and δ = 1e-4 the closed form is invalid for every ε₀"."""
    from fedbandit.accounting.amplification import fmt22_closed_form_validity

    assert not any(fmt22_closed_form_validity(e, 100, 1e-4)[0].holds for e in (0.0, 0.01, 1.0))
