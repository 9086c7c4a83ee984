"""The Poisson-sampled DDG accounting (fedbandit.accounting.sampled_ddg), each step against first principles.

Formulas are written out here, not taken from the module: the smoothing kernel's output by
quadrature and by sampling, the sum of discrete Gaussian shares by exact convolution, and the
whole bound against the exact privacy-loss distribution of the Poisson-sampled pair (one and two
dimensions, dp-accounting's PLD of the exact probability mass functions).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import integrate, stats

from fedbandit.accounting import account
from fedbandit.accounting.ddg import ddg_delta2, ddg_params
from fedbandit.accounting.events import SampledDiscreteGaussianSumEvent, SelfComposedEvent
from fedbandit.accounting.sampled_ddg import (
    SMOOTHING,
    TAIL_SHARE,
    client_shares,
    noise_shares_for,
    sampled_ddg_bound,
    sampled_ddg_epsilon,
    sampled_ddg_noise_std,
    sampling_tail,
    share_closeness,
    smoothing_closeness,
)
from fedbandit.accounting.subsampling import sampled_gaussian_epsilon, sampled_gaussian_noise_multiplier


def _dg_pmf(scale: float, half_width: int) -> np.ndarray:
    """N_Z(0, scale²) on -half_width..half_width, normalized over a much wider range."""
    k = np.arange(-half_width, half_width + 1)
    wide = np.arange(-40 * int(scale + 1) - half_width, 40 * int(scale + 1) + half_width + 1)
    z = np.sum(np.exp(-(wide.astype(float) ** 2) / (2 * scale * scale)))
    return np.exp(-(k.astype(float) ** 2) / (2 * scale * scale)) / z


def _omega(v, b):
    """ω(v) = φ_b(v) / Σ_j φ_b(v − j): the kernel's weights (step 3), written out (|j| ≤ 12 + 12b: the rest of the
    periodization is below e^{-72} of it for the widths here)."""
    j = np.arange(-12 - int(12 * b), 13 + int(12 * b))
    v = np.asarray(v, dtype=float)
    return np.exp(-v * v / (2 * b * b)) / np.exp(-((v[..., None] - j) ** 2) / (2 * b * b)).sum(-1)


def _kernel_pmf(S: float, b: float, ks: np.ndarray) -> np.ndarray:
    """f(k) = ∫ φ_{S'}(k + v) ω(v) dv with S'² = S² − b², by quadrature."""
    Sp = math.sqrt(S * S - b * b)
    return np.array([integrate.quad(lambda v: stats.norm.pdf(k + v, scale=Sp) * _omega(v, b), -12 * b - 1, 12 * b + 1,
                                    epsabs=0, epsrel=1e-13, limit=200)[0] for k in ks])


@pytest.mark.parametrize("S, b", [(3.0, 0.5), (5.0, 0.5), (3.0, 0.7), (10.0, 0.6), (2.0, 0.4)])
def test_smoothing_bound_holds_for_the_kernel_output(S, b):
    """Step 3: the kernel's law f and N_Z(0, S²) are within ℓ(S, b) in max divergence, both ways (quadrature)."""
    ks = np.arange(-int(4 * S), int(4 * S) + 1)
    f = _kernel_pmf(S, b, ks)
    p = _dg_pmf(S, int(4 * S))
    worst = np.max(np.abs(np.log(f / p)))
    bound = smoothing_closeness(S, b)
    assert worst <= bound, (worst, bound)
    assert worst > 0  # the kernel's law is not the discrete Gaussian itself: the bound is doing work


def test_kernel_is_a_shift_equivariant_map_of_the_gaussian():
    """The kernel K(y) = ⌊y⌋ + J, P(J = j | frac y = u) = ω(u − j), applied to N(μ, S'²) for integer μ, gives
    f shifted by μ (chi-square at false-alarm rate 1e-4): the smoothed pair is a post-processing of the Gaussian pair."""
    S, b = 3.0, 0.6
    Sp = math.sqrt(S * S - b * b)
    rng = np.random.default_rng(0)
    n = 100_000
    js = np.arange(-6, 7)  # offsets beyond ±6 have weight below e^{-45} at b = 0.6
    for mu in (0, 5):
        y = rng.normal(mu, Sp, n)
        fl = np.floor(y)
        u = y - fl
        w = _omega(u[:, None] - js[None, :], b)  # (n, 17): the law of J given u (rows sum to ~1)
        w /= w.sum(1, keepdims=True)
        J = js[(rng.random(n)[:, None] > np.cumsum(w, 1)).sum(1)]
        out = (fl + J).astype(int) - mu
        ks = np.arange(-12, 13)
        counts = np.array([(out == k).sum() for k in ks])
        expected = n * _kernel_pmf(S, b, ks)
        chi2 = np.sum((counts - expected) ** 2 / expected)
        assert stats.chi2.sf(chi2, ks.size - 1) > 1e-4, (mu, chi2)


@pytest.mark.parametrize("s, k", [(0.6, 2), (0.6, 5), (0.8, 8), (0.5, 3), (1.0, 20)])
def test_share_closeness_bounds_the_exact_convolution_both_ways(s, k):
    """Step 2 ([KLS21] Thm. 11 by induction): the sum of k shares N_Z(0, s²) and N_Z(0, k s²) are within τ/2 in max
    divergence each way (exact convolution); the module uses τ, twice that."""
    p1 = _dg_pmf(s, 60)
    acc = p1
    for _ in range(k - 1):
        acc = np.convolve(acc, p1)
    half = (acc.size - 1) // 2
    target = _dg_pmf(math.sqrt(k) * s, half)
    keep = np.abs(np.arange(-half, half + 1)) <= 8 * math.sqrt(k) * s + 3
    ratio = np.log(acc[keep] / target[keep])
    tau = 10 * sum(math.exp(-2 * math.pi**2 * s * s * j / (j + 1)) for j in range(1, k))
    assert share_closeness(math.sqrt(k) * s, k) == pytest.approx(tau, rel=1e-12)
    assert ratio.max() <= tau / 2 and -ratio.min() <= tau / 2, (ratio.max(), -ratio.min(), tau)
    assert share_closeness(math.sqrt(k) * 0.49, k) == math.inf or k == 1  # below Thm. 11's share scale


@pytest.mark.parametrize("s, K, k", [(0.6, 8, 3), (0.55, 12, 5), (0.8, 9, 2), (1.0, 20, 20)])
def test_dealt_shares_are_as_close_as_equal_ones(s, K, k):
    """Step 2 with the shares dealt: k clients adding N_Z(0, m_j s²) (Σ m_j = K, client_shares) sum to a law within
    τ(s, K)/2 of N_Z(0, K s²) in max divergence each way (exact convolution)."""
    acc = np.ones(1)
    for m in client_shares(K, k):
        acc = np.convolve(acc, _dg_pmf(math.sqrt(m) * s, 80))
    half = (acc.size - 1) // 2
    target = _dg_pmf(math.sqrt(K) * s, half)
    keep = np.abs(np.arange(-half, half + 1)) <= 8 * math.sqrt(K) * s + 3
    ratio = np.log(acc[keep] / target[keep])
    tau = share_closeness(math.sqrt(K) * s, K)
    assert ratio.max() <= tau / 2 and -ratio.min() <= tau / 2, (ratio.max(), -ratio.min(), tau)


def _exact_pld_epsilon(noise_pmf: np.ndarray, shift: int, q: float, T: int, delta: float) -> float:
    """ε at δ of T rounds of the Poisson-sampled pair ((1 − q)W + q(W + shift), W), both orders, exact pmfs."""
    half = (noise_pmf.size - 1) // 2
    keep = noise_pmf > 1e-300
    support = np.arange(-half, half + 1)[keep]
    w = noise_pmf[keep]
    lower = {int(x): math.log(p) for x, p in zip(support, w)}
    upper_vals = {}
    for x, p in zip(support, w):
        upper_vals[int(x)] = upper_vals.get(int(x), 0.0) + (1 - q) * p
        upper_vals[int(x) + shift] = upper_vals.get(int(x) + shift, 0.0) + q * p
    upper = {x: math.log(p) for x, p in upper_vals.items()}
    lower_full = {x: lower.get(x, -math.inf) for x in upper}
    pld_remove = pld_lib.from_two_probability_mass_functions(lower_full, upper, symmetric=False,
                                                             value_discretization_interval=1e-4)
    upper_full = {x: upper.get(x, -math.inf) for x in lower}
    pld_add = pld_lib.from_two_probability_mass_functions(upper_full, lower, symmetric=False,
                                                          value_discretization_interval=1e-4)
    return max(pld_remove.self_compose(T).get_epsilon_for_delta(delta),
               pld_add.self_compose(T).get_epsilon_for_delta(delta))


@pytest.mark.parametrize("s, K, shift, q, T", [(20.0, 1, 20, 0.2, 10), (6.0, 6, 15, 0.3, 20), (10.0, 4, 12, 0.05, 40),
                                            (1.5, 6, 3, 0.3, 20)])
def test_bound_is_above_the_exact_pld_of_the_sum_of_shares(s, K, shift, q, T):
    """The whole bound against the exact privacy loss of the 1-D pair with the real noise (the K-fold convolution of
    the shares) and an integer shift: sound (never below it), and close where the sum's scale is large against the
    smoothing b = 2 (within 25 %: RDP against the exact PLD); at a scale of 3.7 grid steps b² costs more."""
    noise = _dg_pmf(s, 40 * int(s + 2))
    acc = noise
    for _ in range(K - 1):
        acc = np.convolve(acc, noise)
    delta = 1e-5
    exact = _exact_pld_epsilon(acc, shift, q, T, delta)
    N = 4000  # a population whose tails are negligible at this q (the bound's step 1)
    ours = sampled_ddg_epsilon(math.sqrt(K) * s, delta2=float(shift), gamma=1.0, dim=1, sampling_rate=q, steps=T,
                               population=N, delta=delta, shares=noise_shares_for(q, N, T, delta),
                               present_shares=K)
    assert exact <= ours, (exact, ours)
    if math.sqrt(K) * s >= 10:
        assert ours < 1.25 * exact, (exact, ours)


def test_bound_is_above_the_exact_pld_of_the_product_discrete_gaussian():
    """Two dimensions, shift r = (3, 4) on the integer grid (‖r‖ = 5): the privacy loss depends on y only through
    <y, r>, so the exact pair is that of V = 3ζ₁ + 4ζ₂ (ζ ~ N_Z(0, S²)²) against V + ‖r‖²; its exact PLD is below the
    bound at Δ̃ = 5, and so is the 1-D pair at shift 5 (both integer shifts of norm 5)."""
    S, q, T, delta = 6.0, 0.2, 10, 1e-5
    z = _dg_pmf(S, 60)
    v3 = np.zeros(3 * (z.size - 1) + 1)
    v3[::3] = z
    v4 = np.zeros(4 * (z.size - 1) + 1)
    v4[::4] = z
    V = np.convolve(v3, v4)  # support -420..420, multiples of gcd(3, 4) = 1
    exact_2d = _exact_pld_epsilon(V, 25, q, T, delta)
    exact_1d = _exact_pld_epsilon(_dg_pmf(S, 60), 5, q, T, delta)
    ours = sampled_ddg_epsilon(S, delta2=5.0, gamma=1.0, dim=2, sampling_rate=q, steps=T, population=4000, delta=delta,
                               shares=noise_shares_for(q, 4000, T, delta), present_shares=1)
    assert exact_2d <= ours and exact_1d <= ours, (exact_2d, exact_1d, ours)
    assert exact_2d == pytest.approx(exact_1d, rel=0.05)  # the lattice direction hardly matters at this scale


def test_a_bound_without_the_smoothing_margin_would_be_caught():
    """The check has power: the same Gaussian bound at the full scale S (no b² taken off) and a 20 % larger noise
    multiplier (a plausible slip) falls below the exact PLD of the sampled discrete Gaussian."""
    s, shift, q, T, delta = 3.0, 4, 0.2, 10, 1e-5
    exact = _exact_pld_epsilon(_dg_pmf(s, 160), shift, q, T, delta)
    assert sampled_gaussian_epsilon(1.2 * s / shift, q, T, delta) < exact


def test_tail_and_shares():
    q, N, T, delta = 100 / 1438, 1438, 150, 1e-5
    K = noise_shares_for(q, N, T, delta)
    tail = sampling_tail(q, N, K, T)
    # written out: T (q (1 - q)^(N - 1) + P(Bin(N, q) >= K)), and K the smallest count with T·tail <= TAIL_SHARE·δ
    assert tail == pytest.approx(T * (q * (1 - q) ** (N - 1) + stats.binom.sf(K - 1, N, q)), rel=1e-12)
    assert T * stats.binom.sf(K - 1, N, q) <= TAIL_SHARE * delta < T * stats.binom.sf(K - 2, N, q)
    for k in (1, 7, K - 1, K, K + 5):
        c = client_shares(K, k)
        assert c.size == k and c.min() >= 1 and c.max() - c.min() <= 1 and c.sum() == max(K, k)
    assert noise_shares_for(0.5, 10, 5, 1e-5) == 11  # the tail never reaches the budget: every client of N + 1


def test_calibration_meets_epsilon_and_tracks_the_sampled_gaussian():
    """At the FL setting the DDG noise multiplier is the sampled Gaussian's up to Δ₂/c (rounding) and b²: ratio < 1.01."""
    q, N, T, delta, c, d, gamma, beta = 100 / 1438, 1438, 150, 1e-5, 0.3, 1024, 1.3e-4, math.exp(-0.5)
    d2 = ddg_delta2(c, gamma, d, beta)
    for eps in (0.5, 1.0, 4.0):
        sigma = sampled_ddg_noise_std(eps, delta2=d2, gamma=gamma, dim=d, sampling_rate=q, steps=T, population=N,
                                      delta=delta)
        bound = sampled_ddg_bound(sigma, delta2=d2, gamma=gamma, dim=d, sampling_rate=q, steps=T, population=N,
                                  delta=delta)
        assert bound.epsilon <= eps * (1 + 1e-9) and bound.epsilon > 0.999 * eps
        z_gauss = sampled_gaussian_noise_multiplier(eps, delta, q, T)
        assert 1.0 < sigma / c / z_gauss < 1.01
        assert bound.closeness < 1e-20 and bound.tail <= TAIL_SHARE * delta * 1.001
        assert sampled_ddg_epsilon(0.8 * sigma, delta2=d2, gamma=gamma, dim=d, sampling_rate=q, steps=T,
                                   population=N, delta=delta) > eps


def test_accountant_dispatches_the_event():
    p = ddg_params(16, 3, 160, 650, 0.3, 1.0, 1e-5, steps=150, sampling_rate=100 / 1438, sampling="poisson",
                   population=1438, n_signal=100)
    e = SampledDiscreteGaussianSumEvent(clip=0.3, gamma=p.gamma, beta=p.beta, dim=p.d_pad,
                                        noise_std=math.sqrt(p.n) * p.sigma, sampling_rate=100 / 1438, population=1438,
                                        shares=p.n)
    acc = account(SelfComposedEvent(e, 150), target_epsilon=1.0, target_delta=1e-5)
    assert acc.status == "verified" and acc.epsilon == pytest.approx(p.epsilon_for(p.n), rel=1e-12)
    assert acc.epsilon == pytest.approx(1.0, rel=1e-6)
    # fewer shares in the sum (dropped clients) is less private
    assert p.epsilon_for(p.n // 2) > 1.2


@pytest.mark.parametrize("kwargs, match", [
    (dict(noise_std=0.0), "noise_std"), (dict(sampling_rate=0.0), "sampling_rate"), (dict(population=0), "population"),
    (dict(steps=0), "steps"), (dict(delta=2.0), "delta"), (dict(dim=0), "dim"), (dict(smoothing=-1.0), "smoothing"),
    (dict(shares=0), "shares"), (dict(present_shares=10**6, shares=10), "present_shares"),
])
def test_bad_input_is_refused_by_name(kwargs, match):
    args = dict(noise_std=1.0, delta2=0.3, gamma=1e-3, dim=8, sampling_rate=0.1, steps=10, population=1000,
                delta=1e-5)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        sampled_ddg_bound(**args)
    with pytest.raises(ValueError, match="smoothing"):
        smoothing_closeness(1.0, SMOOTHING)
