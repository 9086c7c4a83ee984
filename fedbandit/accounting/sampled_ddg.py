r"""The Poisson-sampled distributed discrete Gaussian, accounted as the sampled Gaussian that dominates it.

Setting (``create("sum-ddg-secagg", ...)`` configured with ``sampling="poisson"``): a
population of :math:`N` clients; every round each client joins independently with
probability :math:`q`; each of the :math:`k` clients that joined clips its vector to
:math:`c`, rotates it, scales by :math:`1/\gamma`, rounds it conditionally (integer vector of
norm :math:`\le \tilde\Delta = \Delta_2/\gamma`, [KLS21]_ Thm. 1 / Prop. 22) and adds
discrete Gaussian noise for its part of :math:`K` *noise shares* of variance :math:`s^2`: the
:math:`K` shares are dealt round-robin over the :math:`k` clients (:math:`m_j =
\lfloor K/k\rfloor` or :math:`\lceil K/k\rceil` each; one each when :math:`k > K`,
:func:`client_shares`) and client :math:`j` adds :math:`\mathcal N_{\mathbb Z}(0, m_j s^2)` per
coordinate, so that the sum's noise variance is :math:`S^2 = Ks^2` (grid units) whatever the
number of clients; secure aggregation reveals the sum modulo :math:`2^B`.  :math:`K` (:func:`noise_shares_for`) is an
upper quantile of the number of clients.  Neighbouring populations
differ by adding or removing one client (:math:`D` and :math:`D \cup \{x\}`); the adversary
sees every round's modular sum, not who took part, over the :math:`T` rounds, with the
clients' later vectors chosen adaptively from the earlier sums.

**The bound** (:func:`sampled_ddg_bound`).  With :math:`S' = \sqrt{S^2 - b^2}` (a smoothing
width :math:`b`, default :data:`SMOOTHING`), :math:`z' = S'/\tilde\Delta`, and
:math:`(\hat\varepsilon, \hat\delta)` the guarantee of :math:`T` rounds of the
Poisson-sampled Gaussian with noise multiplier :math:`z'`
(:func:`fedbandit.accounting.subsampling.sampled_gaussian_epsilon`: the RDP of Mironov,
Talwar & Zhang [MTZ19]_, converted by [CKS20]_), the run is
:math:`(\hat\varepsilon + 2Ta,\ e^{Ta}\hat\delta + \eta)`-DP, where :math:`a` is a per-round
closeness in max divergence (astronomically small at the book's settings) and :math:`\eta`
what the rounds with no other client, or at least :math:`K` others, cost in δ.  The steps [reconstruction: [KLS21]_ account the sampled DDG with the generic
subsampled-RDP bound of [ZW19]_; the argument below is the book's, every step cited or
checked against the exact distributions in ``tests/test_sampled_ddg.py``]:

1. *Good rounds.* The other clients' participation has the same law with or without
   :math:`x` and is independent of the data.  Condition on which rounds are good: between 1
   and :math:`K - 1` other clients (so the round's :math:`k \le K` clients carry exactly
   :math:`K` shares).  A round with no other client releases nothing without :math:`x` and,
   with probability :math:`q`, :math:`x`'s vector with all :math:`K` shares with it: it is
   :math:`(0, q)`-DP; a round with at least :math:`K` others counts as :math:`(0, 1)`-DP.
   Given the pattern the good rounds (at most :math:`T`) are accounted below, the others
   compose in :math:`\delta`, and averaging over patterns gives
   :math:`\eta = T[q(1-q)^{N-1} + P(\mathrm{Bin}(N, q) \ge K)]` for populations of
   :math:`N - 1` to :math:`N + 1` clients (:func:`sampling_tail`).
2. *Shares → one discrete Gaussian* ([KLS21]_ Thm. 11, extended to several summands by
   induction as in [KLS21]_): per coordinate, the clients' noises
   :math:`\mathcal N_{\mathbb Z}(0, v_j)`, :math:`v_j = m_j s^2 \ge s^2`, add up to a law within
   :math:`\sum_{j<k} 5e^{-2\pi^2/(1/V_j + 1/v_{j+1})}` of :math:`\mathcal N_{\mathbb Z}(0, S^2)`
   in max divergence (:math:`V_j = v_1 + \dots + v_j \ge js^2`), hence within
   :math:`\tau(s, K) = 10\sum_{j<K} e^{-2\pi^2 s^2 j/(j+1)}` in each direction, whatever
   :math:`k \le K` (:func:`share_closeness`; the theorem needs :math:`1/V_j + 1/v_{j+1} \le 8`,
   so :math:`s \ge 1/2`).
3. *Discrete → smoothed continuous* (derived here): the kernel
   :math:`K(y) = \lfloor y\rfloor + J`, with :math:`P(J = j \mid y - \lfloor y\rfloor = u) =
   \omega(u - j)` and :math:`\omega = \varphi_b / \sum_{j\in\mathbb Z}\varphi_b(\cdot - j)`,
   maps :math:`\mathcal N(\mu, S'^2)` to a law :math:`f_{\mu}` on :math:`\mathbb Z` that
   shifts with every integer :math:`\mu`, and by Poisson summation
   :math:`f_0(k) \propto \varphi_{S}(k)\,[h_0 + \sum_{m\ne0} h_m e^{-2\pi^2 m^2 s_c^2} e^{-2\pi i m k b^2/S^2}]`
   (:math:`h_m` the Fourier coefficients of :math:`1/\sum_j\varphi_b(\cdot - j)`,
   :math:`s_c^2 = S'^2 b^2/S^2`), so :math:`f_0` and :math:`\mathcal N_{\mathbb Z}(0, S^2)` are
   within :math:`\ell(S, b) = \log\frac{1+\eta_b}{1-\eta_b}` in max divergence each way,
   :math:`\eta_b = 2\frac{1+2\theta}{1-2\theta}\sum_{m\ge1} e^{-2\pi^2 m^2 s_c^2}`,
   :math:`\theta = \sum_{m\ge1} e^{-2\pi^2 m^2 b^2}` (:func:`smoothing_closeness`).
4. *The dominating pair.* Apply :math:`K` to every coordinate: for a fixed history, the
   other clients' (rounded) vectors :math:`v` and the target's rounded vector :math:`r`
   (integer, :math:`\|r\|_2 \le \tilde\Delta`), the round's pair with noise :math:`f^{\otimes d}` is
   :math:`K` applied to :math:`\big((1-q)\mathcal N(v, S'^2 I) + q\mathcal N(v + r, S'^2 I),\
   \mathcal N(v, S'^2 I)\big)`, the Poisson-sampled Gaussian pair at noise multiplier
   :math:`S'/\|r\|_2 \ge z'` (rotation invariance; a smaller shift is a post-processing of a
   larger one).  Post-processing and mixing over :math:`v, r` (joint convexity) keep its RDP
   at most [MTZ19]_'s, in both orders; the rounds compose adaptively (Mironov 2017, Prop. 1).
5. *Back to the real noise.* With :math:`a = d\,(\tau(S/\sqrt K, K) + \ell(S, b))`, the
   real round's pair is within :math:`a` of the one in step 4 in max divergence, in each
   world and each direction (mixtures keep pointwise ratios), so the :math:`T` rounds are within
   :math:`Ta`: :math:`P(E) \le e^{Ta}\hat P(E) \le e^{Ta}(e^{\hat\varepsilon}\hat Q(E) + \hat\delta) \le
   e^{\hat\varepsilon + 2Ta}Q(E) + e^{Ta}\hat\delta`.  The modular reduction and decoding are
   post-processing.

The guarantee assumes every client that joins adds its shares (the honest clients of
[KLS21]_; shares that are missing lower :math:`S`: ``present_shares``), and is for an analyst who does not see
who took part: the server that contacts the clients knows it, and from its view there is no
amplification ([KLS21]_ Sec. 6.2.3).

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
.. [MTZ19] I. Mironov, K. Talwar and L. Zhang, "Rényi differential privacy of the sampled
   Gaussian mechanism", arXiv:1908.10530, 2019.
.. [ZW19] Y. Zhu and Y.-X. Wang, "Poisson subsampled Rényi differential privacy", ICML 2019.
.. [CKS20] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential
   privacy", NeurIPS 2020.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from fedbandit._validation import (
    MAX_COUNT,
    MAX_STEPS,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_positive_float,
    check_positive_int,
)
from fedbandit.accounting._dg_sums import ddg_tau
from fedbandit.accounting.subsampling import sampled_gaussian_epsilon, sampled_gaussian_noise_multiplier

__all__ = [
    "SMOOTHING",
    "TAIL_SHARE",
    "MIN_SHARE_SCALE",
    "smoothing_closeness",
    "share_closeness",
    "sampling_tail",
    "noise_shares_for",
    "client_shares",
    "SampledDDGBound",
    "sampled_ddg_bound",
    "sampled_ddg_epsilon",
    "sampled_ddg_noise_std",
]

#: Smoothing width b (grid units) of step 3: the continuous Gaussian that dominates has variance
#: S² − b².  At b = 2 the smoothing closeness is below e^{-2π²·3} ≈ 2·10⁻²⁶ per coordinate once S ≥ 4.
SMOOTHING = 2.0

#: Share of the target δ the upper tail of the number of clients may take (step 1): K is the
#: smallest count whose tail over the T rounds is at most this share of δ.
TAIL_SHARE = 1e-3

#: Smallest share scale s = S/√K of [KLS21] Thm. 11 (1/σ² + 1/τ² ≤ 8 for every summand).
MIN_SHARE_SCALE = 0.5

#: Terms of the series over m ≥ 1 in the smoothing bound (each is at most e^{-2π² m² s_c²}).
_SERIES_TERMS = 50


def _log1p_ratio(eta: float) -> float:
    """log((1 + η)/(1 − η)) for η in [0, 1)."""
    return math.log1p(2.0 * eta / (1.0 - eta))


def smoothing_closeness(scale: float, smoothing: float = SMOOTHING) -> float:
    r"""Step 3: max divergence, each way, between :math:`\mathcal N_{\mathbb Z}(0, S^2)` and the smoothed law :math:`f_0`.

    Parameters
    ----------
    scale : float
        :math:`S`, the discrete Gaussian's scale (grid units); must exceed ``smoothing``.
    smoothing : float, default :data:`SMOOTHING`
        :math:`b`: the kernel's Gaussian width; the dominating continuous Gaussian has
        variance :math:`S^2 - b^2`.

    Returns
    -------
    float
        :math:`\ell(S, b) = \log\frac{1+\eta_b}{1-\eta_b}` (module docstring, step 3), or
        ``inf`` when :math:`\eta_b \ge 1` (no bound).
    """
    S = check_positive_float("scale", scale)
    b = check_positive_float("smoothing", smoothing)
    if not S > b:
        raise ValueError(f"scale must exceed smoothing (the dominating Gaussian has variance scale² − smoothing²), "
                         f"got scale={scale!r}, smoothing={smoothing!r}")
    sc2 = (S * S - b * b) * b * b / (S * S)
    theta = sum(math.exp(-2.0 * math.pi**2 * m * m * b * b) for m in range(1, _SERIES_TERMS))
    if 2.0 * theta >= 1.0:
        return math.inf
    series = sum(math.exp(-2.0 * math.pi**2 * m * m * sc2) for m in range(1, _SERIES_TERMS))
    eta = 2.0 * (1.0 + 2.0 * theta) / (1.0 - 2.0 * theta) * series
    return math.inf if eta >= 1.0 else _log1p_ratio(eta)


def share_closeness(scale: float, shares: int) -> float:
    r"""Step 2: max divergence, each way, between a round's summed noise and :math:`\mathcal N_{\mathbb Z}(0, S^2)`.

    The round's :math:`k \le K` clients add :math:`\mathcal N_{\mathbb Z}(0, m_j s^2)`,
    :math:`\sum_j m_j = K`, :math:`s^2 = S^2/K` (:func:`client_shares`); the bound is the one
    of :math:`K` equal shares, which is the largest (module docstring, step 2).

    Parameters
    ----------
    scale : float
        :math:`S`, the scale of the sum (grid units); a share has variance :math:`S^2/K`.
    shares : int
        :math:`K \ge 1`.

    Returns
    -------
    float
        :math:`\tau(S/\sqrt K, K)` of [KLS21]_ Thm. 1 (:func:`fedbandit.accounting.ddg.ddg_tau`),
        per coordinate and each way (Thm. 11 extended by induction bounds it by half this;
        the tests check both directions against the exact convolution), or ``inf`` when a
        share's scale is below :data:`MIN_SHARE_SCALE` (outside Thm. 11).
    """
    S = check_positive_float("scale", scale)
    k = check_positive_int("shares", shares, max_value=MAX_STEPS, reason="τ sums shares − 1 terms")
    s = S / math.sqrt(k)
    if s < MIN_SHARE_SCALE:
        return math.inf
    return ddg_tau(s, k)


def _check_q(q: float, name: str = "sampling_rate") -> float:
    return check_float_in_range(name, q, 0.0, 1.0, low_inclusive=False)


def _check_population(population: int) -> int:
    return check_positive_int("population", population, max_value=MAX_STEPS,
                              reason="the binomial tails are over the population")


def sampling_tail(q: float, population: int, shares: int, steps: int) -> float:
    r"""Step 1: :math:`\eta = T[q(1-q)^{N-1} + P(\mathrm{Bin}(N, q) \ge K)]`.

    The δ the rounds outside the good event cost over the :math:`T` rounds: a round with no
    client but the target (a :math:`(0, q)`-DP release) or with at least :math:`K` others
    (the :math:`K` shares do not cover the round's clients; counted as :math:`(0, 1)`), for
    populations of :math:`N - 1` to :math:`N + 1` clients (the smaller of two neighbours has
    :math:`N - 1` or :math:`N`).

    Parameters
    ----------
    q : float
        Sampling rate in (0, 1].
    population : int
        :math:`N`.
    shares : int
        :math:`K`, the noise shares of a round (the most clients a good round has).
    steps : int
        :math:`T`.

    Returns
    -------
    float
        :math:`\eta` (at most 1).
    """
    q = _check_q(q, "q")
    N = _check_population(population)
    K = check_positive_int("shares", shares, max_value=MAX_STEPS)
    T = check_positive_int("steps", steps, max_value=MAX_COUNT)
    empty = 0.0 if q == 1.0 else q * math.exp((N - 1) * math.log1p(-q))
    crowded = float(stats.binom.sf(K - 1, N, q))
    return min(1.0, T * (empty + crowded))


def noise_shares_for(q: float, population: int, steps: int, delta: float) -> int:
    r"""The :math:`K` of step 1: the smallest count with :math:`T\,P(\mathrm{Bin}(N, q) \ge K) \le`
    :data:`TAIL_SHARE` :math:`\cdot\delta`, at most :math:`N + 1` (where the tail is 0).

    Parameters
    ----------
    q : float
        Sampling rate in (0, 1].
    population : int
        :math:`N`.
    steps : int
        :math:`T`.
    delta : float
        The target δ.

    Returns
    -------
    int
        :math:`K`.
    """
    q = _check_q(q, "q")
    N = _check_population(population)
    T = check_positive_int("steps", steps, max_value=MAX_COUNT)
    delta = check_delta("delta", delta)
    budget = TAIL_SHARE * delta / T
    k = int(stats.binom.isf(budget, N, q)) + 1
    while k <= N and float(stats.binom.sf(k - 1, N, q)) > budget:
        k += 1
    while k > 1 and float(stats.binom.sf(k - 2, N, q)) <= budget:
        k -= 1
    return min(max(k, 1), N + 1)


def client_shares(shares: int, clients: int) -> np.ndarray:
    r"""How many of the :math:`K` noise shares each of the :math:`k` clients of a round adds.

    Dealt round-robin: :math:`\lceil K/k\rceil` to the first :math:`K \bmod k` clients,
    :math:`\lfloor K/k\rfloor` to the others (sum :math:`K`); one each when :math:`k > K`
    (a round outside the good event, sum :math:`k`).

    Parameters
    ----------
    shares : int
        :math:`K`.
    clients : int
        :math:`k`, the clients of the round.

    Returns
    -------
    ndarray of int64, shape (k,)
        Each client's number of shares :math:`m_j`.
    """
    K = check_positive_int("shares", shares, max_value=MAX_STEPS)
    k = check_positive_int("clients", clients, max_value=MAX_STEPS)
    if k > K:
        return np.ones(k, dtype=np.int64)
    out = np.full(k, K // k, dtype=np.int64)
    out[: K % k] += 1
    return out


@dataclass(frozen=True)
class SampledDDGBound:
    """The guarantee of :func:`sampled_ddg_bound` and its parts (module docstring).

    Attributes
    ----------
    epsilon, delta : float
        The run's guarantee: :math:`\\hat\\varepsilon + 2Ta` at :math:`\\delta`.
    noise_multiplier : float
        :math:`z' = \\sqrt{S^2 - b^2}/\\tilde\\Delta` of the dominating sampled Gaussian.
    gaussian_epsilon, gaussian_delta : float
        :math:`(\\hat\\varepsilon, \\hat\\delta)` of the dominating sampled Gaussian's T rounds.
    closeness : float
        :math:`a`, one round's max divergence between the real and the smoothed mechanism.
    tail : float
        :math:`\\eta`, the δ the rounds outside the good event cost.
    shares : int
        :math:`K`.
    """

    epsilon: float
    delta: float
    noise_multiplier: float
    gaussian_epsilon: float
    gaussian_delta: float
    closeness: float
    tail: float
    shares: int


def _inputs(noise_std: float, delta2: float, gamma: float, dim: int, sampling_rate: float, steps: int,
            population: int, delta: float, smoothing: float) -> tuple[float, float, float, int, float, int, int, float,
                                                                      float]:
    sigma = check_positive_float("noise_std", noise_std)
    delta2 = check_positive_float("delta2", delta2)
    gamma = check_positive_float("gamma", gamma)
    d = check_positive_int("dim", dim, max_value=MAX_STEPS, reason="the closeness is summed over the coordinates")
    q = _check_q(sampling_rate)
    T = check_positive_int("steps", steps, max_value=MAX_COUNT)
    N = _check_population(population)
    delta = check_delta("delta", delta)
    b = check_positive_float("smoothing", smoothing)
    return sigma, delta2, gamma, d, q, T, N, delta, b


def _closeness(S: float, d: int, shares: int, b: float) -> float:
    """a = d·(τ(S/√K, K) + ℓ(S, b)) (module docstring, step 5); inf when S ≤ b."""
    if not S > b:
        return math.inf
    return d * (share_closeness(S, shares) + smoothing_closeness(S, b))


def sampled_ddg_bound(noise_std: float, *, delta2: float, gamma: float, dim: int, sampling_rate: float, steps: int,
                      population: int, delta: float, shares: int | None = None, present_shares: int | None = None,
                      smoothing: float = SMOOTHING) -> SampledDDGBound:
    r"""(ε, δ) of ``steps`` rounds of the Poisson-sampled DDG sum (module docstring), with its parts.

    Parameters
    ----------
    noise_std : float
        :math:`\sigma_{\rm sum} = S\gamma`: the standard deviation per coordinate of the
        noise in the sum (original units), whatever the number of clients.
    delta2 : float
        :math:`\Delta_2`: the bound on a rounded vector's norm (original units,
        :func:`fedbandit.accounting.ddg.ddg_delta2`).
    gamma : float
        Grid step :math:`\gamma`.
    dim : int
        Padded dimension :math:`d`.
    sampling_rate : float
        :math:`q` in (0, 1].
    steps : int
        Rounds :math:`T`.
    population : int
        :math:`N`, the clients the rounds sample from.
    delta : float
        Target δ; the dominating Gaussian is accounted at :math:`\hat\delta = (\delta - \eta)e^{-Ta}`.
    shares : int or None
        :math:`K`, the noise shares dealt to a round's clients (default :func:`noise_shares_for`).
    present_shares : int or None
        The shares actually in the sum, if fewer than :math:`K` (dropped clients' shares are
        missing; ``noise_std`` is then the noise of the present ones).  Default :math:`K`.
    smoothing : float, default :data:`SMOOTHING`
        :math:`b` (grid units).

    Returns
    -------
    SampledDDGBound
        ``epsilon = inf`` when no bound applies (the noise too small for [KLS21]_ Thm. 11 or
        the smoothing, or the tail above δ).
    """
    sigma, delta2, gamma, d, q, T, N, delta, b = _inputs(noise_std, delta2, gamma, dim, sampling_rate, steps,
                                                         population, delta, smoothing)
    K = noise_shares_for(q, N, T, delta) if shares is None else check_positive_int("shares", shares,
                                                                                   max_value=MAX_STEPS)
    present = K if present_shares is None else check_positive_int("present_shares", present_shares, max_value=K)
    S = sigma / gamma
    tail = sampling_tail(q, N, K, T)
    a = _closeness(S, d, present, b)
    z = math.sqrt(max(S * S - b * b, 0.0)) * gamma / delta2
    if not (math.isfinite(a) and tail < delta and z > 0.0):
        return SampledDDGBound(math.inf, delta, z, math.inf, delta, a, tail, K)
    g_delta = (delta - tail) * math.exp(-T * a)
    g_eps = sampled_gaussian_epsilon(z, q, T, g_delta)
    return SampledDDGBound(g_eps + 2.0 * T * a, delta, z, g_eps, g_delta, a, tail, K)


def sampled_ddg_epsilon(noise_std: float, *, delta2: float, gamma: float, dim: int, sampling_rate: float, steps: int,
                        population: int, delta: float, shares: int | None = None, present_shares: int | None = None,
                        smoothing: float = SMOOTHING) -> float:
    """ε of :func:`sampled_ddg_bound`.

    Parameters
    ----------
    noise_std, delta2, gamma, dim, sampling_rate, steps, population, delta, shares, present_shares, smoothing
        As in :func:`sampled_ddg_bound`.

    Returns
    -------
    float
        ``sampled_ddg_bound(...).epsilon``.
    """
    return sampled_ddg_bound(noise_std, delta2=delta2, gamma=gamma, dim=dim, sampling_rate=sampling_rate, steps=steps,
                             population=population, delta=delta, shares=shares, present_shares=present_shares,
                             smoothing=smoothing).epsilon


@functools.lru_cache(maxsize=256)
def _noise_multiplier(epsilon: float, delta: float, q: float, steps: int) -> float:
    # the dominating Gaussian's calibration, shared by every grid step γ the DDG parameter search tries
    return sampled_gaussian_noise_multiplier(epsilon, delta, q, steps)


def sampled_ddg_noise_std(epsilon: float, *, delta2: float, gamma: float, dim: int, sampling_rate: float, steps: int,
                          population: int, delta: float, shares: int | None = None,
                          smoothing: float = SMOOTHING) -> float:
    r"""The noise :math:`\sigma_{\rm sum}` of the sum (original units) at which :func:`sampled_ddg_bound` meets ``epsilon``.

    The dominating sampled Gaussian is calibrated for :math:`(\varepsilon - 2Ta,
    (\delta - \eta)e^{-Ta})` (:func:`fedbandit.accounting.subsampling.sampled_gaussian_noise_multiplier`),
    with :math:`a` evaluated at the noise that ignores it (:math:`a` falls as the noise grows,
    so the result is at least as private); then :math:`\sigma_{\rm sum} = \gamma\sqrt{(z'\tilde\Delta)^2 + b^2}`.

    Parameters
    ----------
    epsilon : float
        The target ε.
    delta2, gamma, dim, sampling_rate, steps, population, delta, shares, smoothing
        As in :func:`sampled_ddg_bound`.

    Returns
    -------
    float
        :math:`\sigma_{\rm sum}`.

    Raises
    ------
    ValueError
        When the sampling tail alone exceeds δ, or no noise makes the closeness finite.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    _, delta2, gamma, d, q, T, N, delta, b = _inputs(1.0, delta2, gamma, dim, sampling_rate, steps, population,
                                                     delta, smoothing)
    K = noise_shares_for(q, N, T, delta) if shares is None else check_positive_int("shares", shares,
                                                                                   max_value=MAX_STEPS)
    tail = sampling_tail(q, N, K, T)
    if tail >= delta:
        raise ValueError(f"the chance of a round with no other client or at least {K} ({T} rounds, q={q:g}, "
                         f"population={N}) is {tail:.3g} >= delta={delta:g}: no DDG noise gives this delta")
    z0 = _noise_multiplier(epsilon, delta - tail, q, T)
    S0 = math.hypot(z0 * delta2 / gamma, b)
    a = _closeness(S0, d, K, b)
    if not (math.isfinite(a) and 2.0 * T * a < epsilon):
        raise ValueError(f"the noise that epsilon={epsilon:g} needs is too small for the discrete Gaussian closeness "
                         f"bounds (a share's scale below {MIN_SHARE_SCALE}, or the smoothing): grid step gamma={gamma:g}")
    z = z0 if a == 0.0 else _noise_multiplier(epsilon - 2.0 * T * a, (delta - tail) * math.exp(-T * a), q, T)
    return gamma * math.hypot(z * delta2 / gamma, b)
