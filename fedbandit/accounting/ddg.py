r"""Privacy accounting of the distributed discrete Gaussian mechanism [KLS21]_.

Each of :math:`n` clients adds :math:`\mathcal N_{\mathbb Z}(0, \sigma^2/\gamma^2)` to its
scaled, rounded vector (original units: noise scale :math:`\sigma`, grid step
:math:`\gamma`).  The sum of :math:`n` discrete Gaussians is not a discrete Gaussian,
but it is close: with

.. math:: \tau = 10 \sum_{k=1}^{n-1} \exp\!\Big(-2\pi^2 \frac{\sigma^2}{\gamma^2}\frac{k}{k+1}\Big)

the released sum satisfies :math:`\tfrac12\varepsilon^2`-zCDP with ([KLS21]_ Theorem 1)

.. math:: \varepsilon = \min\Big\{ \sqrt{\frac{\Delta_2^2}{n\sigma^2} + 2\tau d},\;
          \frac{\Delta_2}{\sqrt n\,\sigma} + \tau\sqrt d \Big\},

and :math:`(\alpha, \varepsilon(\alpha))`-RDP with ([KLS21]_ Proposition 14)

.. math:: \varepsilon(\alpha) = \min\Big\{ \frac{\alpha}{2}\frac{\Delta_2^2}{n\sigma^2} + \tau d,\;
   \frac{\alpha}{2}\Big(\frac{\Delta_2^2}{n\sigma^2} + \frac{2\tau\Delta_1}{\sqrt n\sigma} + \tau^2 d\Big),\;
   \frac{\alpha}{2}\Big(\frac{\Delta_2}{\sqrt n\sigma} + \tau\sqrt d\Big)^2 \Big\},

where the sensitivity after conditional randomized rounding with parameter
:math:`\beta` is ([KLS21]_ Theorem 1 / Proposition 22)

.. math:: \Delta_2^2 = \min\Big\{ c^2 + \frac{\gamma^2 d}{4}
   + \sqrt{2\log(1/\beta)}\,\gamma\Big(c + \frac{\gamma\sqrt d}{2}\Big),\;
   (c + \gamma\sqrt d)^2 \Big\}

(the first term only for :math:`\beta > 0`), and :math:`\Delta_1 \le \sqrt d\,\Delta_2`.
Here :math:`n` counts the honest clients whose noise is in the sum (dropped clients'
noise is missing) and neighbouring datasets differ by adding or removing one client.

Conversions to :math:`(\varepsilon, \delta)` use :mod:`fedbandit.accounting.zcdp`
([CKS20] conversion for zCDP and for RDP).  The continuous central baseline, the
analytic Gaussian mechanism, lives in :mod:`fedbandit.mechanisms.gaussian`.

The Theorem 1 and Proposition 14 formulas are those of Kairouz, Liu & Steinke (2021);
they reproduce the paper's worked example (:math:`\sigma = \Delta = 1`, :math:`n = 10^4`
gives :math:`\varepsilon < 0.02`), agree with the authors' public accounting code, and the
closeness bound behind τ (Theorem 11, by induction) is checked against the exact convolution
of discrete Gaussians in ``tests/test_sampled_ddg.py``.

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

from fedbandit._combinatorics import flattened_dim
from fedbandit._validation import (
    MAX_MAGNITUDE,
    MAX_STEPS,
    check_array,
    check_choice,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_int_in_range,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
)
from fedbandit.accounting._dg_sums import ddg_tau
from fedbandit.accounting._roots import decreasing_root
from fedbandit.accounting.sampled_ddg import client_shares, sampled_ddg_epsilon, sampled_ddg_noise_std
from fedbandit.accounting.subsampling import subsampled_epsilon
from fedbandit.accounting.zcdp import cks_conversion_terms, over_sigma_squared, rdp_to_approx_dp, zcdp_to_approx_dp

__all__ = [
    "RDP_ORDERS",
    "ddg_tau",
    "ddg_delta2",
    "ddg_zcdp_epsilon",
    "ddg_rdp",
    "ddg_epsilon",
    "ddg_sigma_for_epsilon",
    "sum_closeness_bound",
    "single_dg_sum_epsilon",
    "DDGParams",
    "ddg_params",
    "ddg_params_from_gamma",
    "ddg_tree_params",
    "DEFAULT_BETA",
]

#: RDP orders used for the RDP -> (eps, delta) conversion (fine grid; the RDP is closed form).
RDP_ORDERS = np.concatenate([1.0 + np.geomspace(1e-3, 1.0, 200)[:-1], np.geomspace(2.0, 1e5, 600)])


def _check_n(n: int, name: str = "n") -> int:
    return check_positive_int(name, n, max_value=MAX_STEPS, reason="τ sums n − 1 terms, in time proportional to n")


def _check_poisson(method: str, amplification: str, population: int | None) -> int:
    """Poisson sampling of the clients: accounted in RDP, add/remove one client, from a stated population."""
    if method != "rdp":
        raise ValueError(f"sampling='poisson' is accounted through the sampled Gaussian's RDP: use method='rdp', "
                         f"got {method!r}")
    if amplification != "poisson":
        raise ValueError(f"sampling='poisson' is proven for adding or removing one client: use amplification='poisson', "
                         f"got {amplification!r}")
    if population is None:
        raise ValueError("sampling='poisson' needs population, the number N of clients the rounds sample from")
    return check_positive_int("population", population, max_value=MAX_STEPS,
                              reason="the binomial tails are over the population")


def ddg_delta2(c: float, gamma: float, d: int, beta: float) -> float:
    r"""The :math:`\ell_2` sensitivity :math:`\Delta_2` after conditional randomized rounding ([KLS21]_ Thm. 1).

    Parameters
    ----------
    c : float
        Clipping norm.
    gamma : float
        Rounding granularity :math:`\gamma`.
    d : int
        Dimension (after padding).
    beta : float
        Conditional rounding parameter in [0, 1); 0 means unconditional rounding and
        the worst-case bound :math:`c + \gamma\sqrt d`.

    Returns
    -------
    float
        Δ₂.
    """
    c = check_positive_float("c", c)
    gamma = check_positive_float("gamma", gamma)
    d = check_positive_int("d", d)
    beta = check_float_in_range("beta", beta, 0.0, 1.0, high_inclusive=False)
    worst = (c + gamma * math.sqrt(d)) ** 2
    if beta == 0.0:
        return math.sqrt(worst)
    cond = c * c + gamma * gamma * d / 4.0 + math.sqrt(2.0 * math.log(1.0 / beta)) * gamma * (
        c + gamma * math.sqrt(d) / 2.0
    )
    return math.sqrt(min(cond, worst))


def ddg_zcdp_epsilon(delta2: float, sigma: float, gamma: float, n: int, d: int) -> float:
    r"""The :math:`\varepsilon` of [KLS21]_ Theorem 1: the sum is :math:`\tfrac12\varepsilon^2`-zCDP.

    Parameters
    ----------
    delta2 : float
        Δ₂.
    sigma : float
        σ, each client's noise scale.
    gamma : float
        γ.
    n : int
        Clients whose noise is in the sum.
    d : int
        The (padded) dimension.

    Returns
    -------
    float
        ε, with the sum ½ε²-zCDP.
    """
    delta2 = check_positive_float("delta2", delta2)
    sigma = check_positive_float("sigma", sigma)
    gamma = check_positive_float("gamma", gamma)
    n = _check_n(n)
    d = check_positive_int("d", d)
    tau = ddg_tau(sigma / gamma, n)
    a = over_sigma_squared(delta2**2, n, sigma, sigma**2)  # Δ₂²/(nσ²); +inf once σ² underflows
    return min(math.sqrt(a + 2.0 * tau * d), math.sqrt(a) + tau * math.sqrt(d))


def ddg_rdp(orders: ArrayLike, delta2: float, sigma: float, gamma: float, n: int, d: int,
            delta1: float | None = None) -> np.ndarray:
    r"""RDP curve :math:`\varepsilon(\alpha)` of one DDG release ([KLS21]_ Proposition 14).

    ``delta1`` is an :math:`\ell_1` sensitivity bound; the default
    :math:`\sqrt d\,\Delta_2` makes the middle term equal to the last one.

    Parameters
    ----------
    orders : array_like
        Rényi orders α > 1.
    delta2 : float
        Δ₂.
    sigma : float
        σ, each client's noise scale.
    gamma : float
        γ.
    n : int
        Clients whose noise is in the sum.
    d : int
        The (padded) dimension.
    delta1 : float, optional
        Δ₁ (default sqrt(d) Δ₂).

    Returns
    -------
    ndarray
        ε(α) at each order.
    """
    alpha = check_array("orders", orders)
    if alpha.ndim > 1 or alpha.size == 0 or np.any(alpha <= 1.0):
        raise ValueError(f"orders must be a non-empty 1-D array of values > 1, got {orders!r:.80}")
    delta2 = check_positive_float("delta2", delta2)
    sigma = check_positive_float("sigma", sigma)
    gamma = check_positive_float("gamma", gamma)
    n = _check_n(n)
    d = check_positive_int("d", d)
    delta1 = math.sqrt(d) * delta2 if delta1 is None else check_positive_float("delta1", delta1)
    return _ddg_rdp_checked(alpha / 2.0, delta2, sigma, gamma, n, d, delta1)


def _ddg_rdp_checked(half_alpha: np.ndarray, delta2: float, sigma: float, gamma: float, n: int, d: int,
                     delta1: float) -> np.ndarray:
    """:func:`ddg_rdp` on checked arguments, the orders given as α/2."""
    tau = ddg_tau(sigma / gamma, n)
    a = over_sigma_squared(delta2**2, n, sigma, sigma**2)  # Δ₂²/(nσ²); +inf once σ² underflows
    t1 = half_alpha * a + tau * d
    t2 = half_alpha * (a + 2.0 * tau * delta1 / (math.sqrt(n) * sigma) + tau**2 * d)
    t3 = half_alpha * (math.sqrt(a) + tau * math.sqrt(d)) ** 2
    return np.minimum(np.minimum(t1, t2), t3)


#: α/2 and log(1 − 1/α) on :data:`RDP_ORDERS` (the terms of the [CKS20] conversion that do not depend on δ).
_HALF_ORDERS = RDP_ORDERS / 2.0


class _FixedRoundsEpsilon:
    """ε(σ) of :func:`ddg_epsilon` (``method="rdp"``, every client in every release) on checked arguments.

    The same arithmetic, in the same order, as ``ddg_epsilon(σ, ...)`` -- Proposition 14 on
    :data:`RDP_ORDERS`, composed and converted by [CKS20] Prop. 12 as
    :func:`fedbandit.accounting.zcdp.rdp_to_approx_dp` does, with its terms from
    :func:`~fedbandit.accounting.zcdp.cks_conversion_terms` -- with what does not depend on σ
    (Δ₂, the conversion's terms) computed once: the root finding of
    :func:`ddg_sigma_for_epsilon` evaluates it a few dozen times per calibration.
    """

    def __init__(self, *, c: float, gamma: float, beta: float, n: int, d: int, delta: float, steps: int) -> None:
        self.delta2 = ddg_delta2(c, gamma, d, beta)
        self.gamma, self.n, self.d, self.steps = gamma, n, d, steps
        self.delta1 = math.sqrt(d) * self.delta2
        self.log_ratio, self.delta_term = cks_conversion_terms(RDP_ORDERS, delta)

    def __call__(self, sigma: float) -> float:
        rdp = self.steps * _ddg_rdp_checked(_HALF_ORDERS, self.delta2, sigma, self.gamma, self.n, self.d, self.delta1)
        if not np.all(np.isfinite(rdp)):
            return math.inf
        return max(0.0, float(np.min(rdp + self.log_ratio - self.delta_term)))


def ddg_epsilon(
    sigma: float,
    *,
    c: float,
    gamma: float,
    beta: float,
    n: int,
    d: int,
    delta: float,
    steps: int = 1,
    method: str = "rdp",
    sampling_rate: float = 1.0,
    amplification: str = "poisson",
    sampling: str = "fixed",
    population: int | None = None,
    shares: int | None = None,
) -> float:
    r"""(ε, δ) of ``steps`` compositions of the distributed discrete Gaussian ([KLS21]_).

    Parameters
    ----------
    sigma : float
        Per-client noise scale in original units (the discrete Gaussian has scale
        :math:`\sigma/\gamma` on the integer grid).
    c, gamma, beta, d
        Clipping norm, granularity, rounding parameter and (padded) dimension; they give
        :math:`\Delta_2` via :func:`ddg_delta2`.
    n : int
        Number of honest, non-dropped clients whose noise is in the sum.
    delta : float
        Target δ.
    steps : int
        Number of composed releases (each with fresh noise).
    method : {"rdp", "zcdp"}
        ``"rdp"``: Proposition 14 summed over ``steps`` and converted with the [CKS20]
        RDP conversion on :data:`RDP_ORDERS` (what the authors' code does);
        ``"zcdp"``: Theorem 1's :math:`\rho = \tfrac12\varepsilon^2` per step, composed and
        converted with the [CKS20] zCDP conversion.
    sampling_rate : float, default 1
        q: every release sums a random sample of the clients, drawn with probability q
        each (``amplification="poisson"``, add/remove one client: [ZW19] Thm. 5 on
        Prop. 14, as [KLS21] Sec. 6.2.3) or as a fixed-size subset of a population
        (``"without-replacement"``, replace one client's data: [WBK19] Thm. 9 on Prop. 14 at
        sensitivity 2Δ₂); :func:`fedbandit.accounting.subsampling.subsampled_epsilon`.
        Needs ``method="rdp"``.
    amplification : {"poisson", "without-replacement"}
    sampling : {"fixed", "poisson"}, default "fixed"
        ``"poisson"``: every client of a ``population`` joins each round with probability
        ``sampling_rate``, and the ``shares`` noise shares N_Z(0, σ²/γ²) are dealt over the
        clients that joined, so that the sum carries them all whatever their number; ``n``
        counts the shares actually in the sum (``shares``, or fewer after dropouts).
        Add/remove one client, accounted through the sampled Gaussian that dominates it
        (:func:`fedbandit.accounting.sampled_ddg.sampled_ddg_epsilon`).  Needs
        ``amplification="poisson"`` and ``method="rdp"``.
    population : int or None
        N, the clients a Poisson round samples from (``sampling="poisson"`` only).
    shares : int or None
        K, the noise shares dealt in a Poisson round (default ``n``).

    Returns
    -------
    float
        ε at ``delta``.
    """
    check_choice("method", method, ("rdp", "zcdp"))
    sigma = check_positive_float("sigma", sigma)
    delta = check_delta("delta", delta)
    steps = check_positive_int("steps", steps)
    sampling_rate = check_float_in_range("sampling_rate", sampling_rate, 0.0, 1.0, low_inclusive=False)
    check_choice("amplification", amplification, ("poisson", "without-replacement"))
    check_choice("sampling", sampling, ("fixed", "poisson"))
    delta2 = ddg_delta2(c, gamma, d, beta)
    if sampling == "poisson":
        N = _check_poisson(method, amplification, population)
        n = _check_n(n)
        K = n if shares is None else check_positive_int("shares", shares, max_value=MAX_STEPS)
        return sampled_ddg_epsilon(math.sqrt(n) * sigma, delta2=delta2, gamma=gamma, dim=d,
                                   sampling_rate=sampling_rate, steps=steps, population=N, delta=delta,
                                   shares=K, present_shares=n)
    if sampling_rate < 1.0:
        if method != "rdp":
            raise ValueError(f"sampling_rate={sampling_rate} < 1 is accounted in Rényi DP: use method='rdp', got {method!r}")
        factor = 1.0 if amplification == "poisson" else 2.0  # replace-one: two rounded vectors, each ≤ Δ₂
        return subsampled_epsilon(lambda a: ddg_rdp(a, factor * delta2, sigma, gamma, n, d), sampling_rate, steps,
                                  delta, amplification)
    if method == "zcdp":
        eps1 = ddg_zcdp_epsilon(delta2, sigma, gamma, n, d)
        rho = steps * 0.5 * eps1 * eps1
        # a σ so small that ρ leaves the float range: the bound gives no finite ε
        return zcdp_to_approx_dp(rho, delta) if rho <= MAX_MAGNITUDE else math.inf
    rdp = steps * ddg_rdp(RDP_ORDERS, delta2, sigma, gamma, n, d)
    # a σ so small that (Δ₂/σ)² overflows: the RDP bound is +inf, so is ε
    return rdp_to_approx_dp(RDP_ORDERS, rdp, delta) if np.all(np.isfinite(rdp)) else math.inf


def ddg_sigma_for_epsilon(
    epsilon: float,
    *,
    c: float,
    gamma: float,
    beta: float,
    n: int,
    d: int,
    delta: float,
    steps: int = 1,
    method: str = "rdp",
    sampling_rate: float = 1.0,
    amplification: str = "poisson",
    sampling: str = "fixed",
    population: int | None = None,
) -> float:
    r"""Smallest per-client :math:`\sigma` with :func:`ddg_epsilon` :math:`\le` ``epsilon`` (1-D root finding).

    :math:`\varepsilon` decreases in :math:`\sigma` (both :math:`\Delta_2/(\sqrt n\sigma)`
    and :math:`\tau` do), so the root is unique.  ``sampling="poisson"``: one of the ``n``
    noise shares of the sum's noise from :func:`fedbandit.accounting.sampled_ddg.sampled_ddg_noise_std`
    (the dominating sampled Gaussian's own calibration, no search over σ here).

    Parameters
    ----------
    epsilon : float
        The target ε.
    c : float
        The clipping norm.
    gamma : float
        The granularity γ.
    beta : float
        The conditional rounding parameter β.
    n : int
        Clients whose noise is in the sum.
    d : int
        The (padded) dimension.
    delta : float
        δ.
    steps : int, default 1
        Releases composed.
    method : {"rdp", "zcdp"}, default "rdp"
        The accounting (:func:`ddg_epsilon`).
    sampling_rate : float, default 1.0
        q of each release.
    amplification : {"poisson", "without-replacement"}, default "poisson"
        The subsampling (:func:`ddg_epsilon`).
    sampling : {"fixed", "poisson"}, default "fixed"
        How the rounds' clients are drawn (:func:`ddg_epsilon`); ``"poisson"``: ``n`` is
        the number of noise shares dealt over a round's clients.
    population : int or None
        N, the clients a Poisson round samples from (``sampling="poisson"`` only).

    Returns
    -------
    float
        The smallest σ (original units).
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta2 = ddg_delta2(c, gamma, d, beta)  # validates c, gamma, d, beta
    n = _check_n(n)
    delta = check_delta("delta", delta)
    steps = check_positive_int("steps", steps)
    check_choice("method", method, ("rdp", "zcdp"))
    sampling_rate = check_float_in_range("sampling_rate", sampling_rate, 0.0, 1.0, low_inclusive=False)
    check_choice("amplification", amplification, ("poisson", "without-replacement"))
    check_choice("sampling", sampling, ("fixed", "poisson"))
    if sampling == "poisson":
        population = _check_poisson(method, amplification, population)
        total = sampled_ddg_noise_std(epsilon, delta2=delta2, gamma=gamma, dim=d, sampling_rate=sampling_rate,
                                      steps=steps, population=population, delta=delta, shares=n)
        return total / math.sqrt(n)

    fixed_rounds = (_FixedRoundsEpsilon(c=c, gamma=gamma, beta=beta, n=n, d=d, delta=delta, steps=steps)
                    if method == "rdp" and sampling_rate == 1.0 else None)

    def gap(log_sigma: float) -> float:
        if fixed_rounds is not None:  # ddg_epsilon's own value, without re-checking the arguments every step
            return fixed_rounds(math.exp(log_sigma)) - epsilon
        return (
            ddg_epsilon(
                math.exp(log_sigma), c=c, gamma=gamma, beta=beta, n=n, d=d, delta=delta, steps=steps, method=method,
                sampling_rate=sampling_rate, amplification=amplification,
            )
            - epsilon
        )

    # Start from the Gaussian-like guess sigma ~ c sqrt(steps log(1/delta)) / (sqrt(n) eps).
    guess = math.log(c * math.sqrt(2.0 * steps * math.log(1.0 / delta)) * min(1.0, 2.0 * sampling_rate)
                     / (math.sqrt(n) * epsilon) + gamma)
    # ε(σ) decreases from ∞ (σ → 0) to 0 (σ → ∞): the bracket exists unless σ leaves the
    # float range (an ε so large or small that no representable σ reaches it)
    return math.exp(decreasing_root(
        gap, guess - 3.0, guess + 3.0, step=3.0, lowest=-690.0, highest=690.0,
        below=lambda lo: f"epsilon={epsilon!r} is too large: even sigma = {math.exp(lo):.3g} achieves less",
        above=lambda hi: f"epsilon={epsilon!r} is too small: no sigma up to {math.exp(hi):.3g} achieves it"))


def sum_closeness_bound(sigma2: float, tau2: float) -> float:
    r"""[KLS21]_ Theorem 11: :math:`D_\infty(\mathcal N_{\mathbb Z}(0,\sigma^2) * \mathcal N_{\mathbb Z}(0,\tau^2) \,\|\, \mathcal N_{\mathbb Z}(0,\sigma^2+\tau^2))`.

    Returns the bound :math:`5\exp(-2\pi^2/(1/\sigma^2 + 1/\tau^2))`, valid when
    :math:`1/\sigma^2 + 1/\tau^2 \le 8`; it reproduces the paper's "≤ 1e-12 at σ² = τ² = 3",
    and ``tests/test_sampled_ddg.py`` checks it, in both directions, against the exact convolution.

    Parameters
    ----------
    sigma2, tau2 : float
        The two discrete Gaussians' variances σ², τ².

    Returns
    -------
    float
        The bound on the divergence.
    """
    sigma2 = check_positive_float("sigma2", sigma2)
    tau2 = check_positive_float("tau2", tau2)
    s = 1.0 / sigma2 + 1.0 / tau2
    if s > 8.0:
        raise ValueError(f"the bound needs 1/sigma2 + 1/tau2 <= 8, got {s!r}")
    return 5.0 * math.exp(-2.0 * math.pi**2 / s)


def single_dg_sum_epsilon(sensitivity: float, sigma: float, n: int) -> float:
    r"""[KLS21]_ Proposition 13: ε for adding a sum of :math:`n` i.i.d. :math:`\mathcal N_{\mathbb Z}(0,\sigma^2)`.

    .. math:: \varepsilon = \min\Big\{\sqrt{\frac{\Delta^2}{n\sigma^2} + 20\sum_{k=1}^{n-1}
       e^{-2\pi^2\sigma^2\frac{k}{k+1}}},\; \frac{|\Delta|}{\sqrt n\sigma} + 10\sum_{k=1}^{n-1}
       e^{-2\pi^2\sigma^2\frac{k}{k+1}}\Big\}

    (one-dimensional; the mechanism is :math:`\tfrac12\varepsilon^2`-zCDP).

    Parameters
    ----------
    sensitivity : float
        Δ.
    sigma : float
        σ of each discrete Gaussian (grid step 1).
    n : int
        The number of summed noises.

    Returns
    -------
    float
        ε.
    """
    sensitivity = check_nonnegative_float("sensitivity", sensitivity)
    sigma = check_positive_float("sigma", sigma)
    n = _check_n(n)
    tau = ddg_tau(sigma, n)  # here the grid step is 1
    a = over_sigma_squared(sensitivity**2, n, sigma, sigma**2)
    return min(math.sqrt(a + 2.0 * tau), math.sqrt(a) + tau)


#: The conditional rounding parameter β used unless one is given: e^(-1/2).
DEFAULT_BETA = math.exp(-0.5)


@dataclass(frozen=True)
class DDGParams:
    """All parameters of one DDG configuration (original units unless stated).

    Attributes
    ----------
    bits : int
        Bits per coordinate :math:`B`; modulus :math:`m = 2^B`.
    k : float
        Number of aggregate standard deviations that the modular range covers.
    n : int
        Number of clients the noise was calibrated for.
    d, d_pad : int
        Input dimension and flattened (padded) dimension.
    c : float
        Clipping norm.
    epsilon, delta : float
        Target privacy of one release (or of ``steps`` releases).
    beta : float
        Conditional rounding parameter.
    gamma : float
        Granularity :math:`\\gamma`.
    sigma : float
        Per-client noise scale in original units (integer-grid scale ``sigma / gamma``).
    delta2 : float
        Sensitivity bound :math:`\\Delta_2` enforced by conditional rounding.
    norm_growth : {"conservative", "optimistic"}, default "conservative"
        How the sum's norm grows with n.
    flatten : {"hadamard", "dft"}, default "hadamard"
        The flattener.
    method : {"rdp", "zcdp"}, default "rdp"
        The accounting.
    steps : int, default 1
        Releases composed.
    rho : float, default 1.0
        The flatness constant ρ.
    sampling_rate : float, default 1.0
        q of each release.
    amplification : {"poisson", "without-replacement"}, default "poisson"
        The subsampling.
    sampling : {"fixed", "poisson"}
        How the rounds' clients are drawn (:func:`ddg_epsilon`); ``"poisson"``: ``n`` is the
        number K of noise shares of scale ``sigma`` dealt over the clients of a round
        (:meth:`noise_shares`).
    population : int or None
        N, the clients a Poisson round samples from.
    """

    bits: int
    k: float
    n: int
    d: int
    d_pad: int
    c: float
    epsilon: float
    delta: float
    beta: float
    gamma: float
    sigma: float
    delta2: float
    norm_growth: str = "conservative"
    flatten: str = "hadamard"
    method: str = "rdp"
    steps: int = 1
    rho: float = 1.0
    sampling_rate: float = 1.0
    amplification: str = "poisson"
    sampling: str = "fixed"
    population: int | None = None

    @property
    def modulus(self) -> int:
        return 1 << self.bits

    @property
    def sigma_int(self) -> float:
        """Scale of the discrete Gaussian on the integer grid, :math:`\\sigma/\\gamma`."""
        return self.sigma / self.gamma

    @property
    def delta2_int(self) -> float:
        """Norm bound on the integer grid, :math:`\\Delta_2/\\gamma`."""
        return self.delta2 / self.gamma

    def epsilon_for(self, n_honest: int, delta: float | None = None) -> float:
        """ε when only ``n_honest`` clients' noise is in the sum (dropouts), at fixed γ and σ."""
        return ddg_epsilon(
            self.sigma,
            c=self.c,
            gamma=self.gamma,
            beta=self.beta,
            n=n_honest,
            d=self.d_pad,
            delta=self.delta if delta is None else delta,
            steps=self.steps,
            method=self.method,
            sampling_rate=self.sampling_rate,
            amplification=self.amplification,
            sampling=self.sampling,
            population=self.population,
            shares=self.n if self.sampling == "poisson" else None,
        )

    def noise_shares(self, clients: int) -> np.ndarray:
        """How many noise shares N_Z(0, σ²/γ²) each of ``clients`` clients adds to a round's sum.

        Fixed-size rounds: one each; Poisson rounds (``sampling="poisson"``): the ``n`` shares
        dealt round-robin (:func:`fedbandit.accounting.sampled_ddg.client_shares`).
        """
        k = check_positive_int("clients", clients, max_value=MAX_STEPS)
        if self.sampling != "poisson":
            return np.ones(k, dtype=np.int64)
        return client_shares(self.n, k)

    def noise_mse(self) -> float:
        """Per-coordinate MSE of the *sum* due to privacy noise alone, :math:`n\\sigma^2` (approximately)."""
        return self.n * self.sigma**2

    def as_dict(self) -> dict:
        return asdict(self)


#: Smallest k (standard deviations of the aggregate covered by the modular range): below it
#: almost every sum wraps, and the grid-step search leaves the float range.
MIN_K = 1e-3


def check_modular_k(k: float) -> float:
    """k of the modular-range rule, in [:data:`MIN_K`, inf)."""
    k = check_positive_float("k", k)
    if k < MIN_K:
        raise ValueError(f"k must be at least {MIN_K:g} (the modular range covers k standard deviations of the sum; "
                         f"below that almost every sum wraps), got {k!r}")
    return k


def _check_common(bits: int, k: float, n: int, d: int, c: float, epsilon: float, delta: float, beta: float,
                  norm_growth: str, flatten: str, method: str, steps: int) -> tuple[Any, ...]:
    bits = check_int_in_range("bits", bits, 2, 62)
    k = check_modular_k(k)
    n = _check_n(n)
    d = check_positive_int("d", d, max_value=MAX_STEPS, reason="the flattening works on vectors of d entries")
    c = check_positive_float("c", c)
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    beta = check_float_in_range("beta", beta, 0.0, 1.0, high_inclusive=False)
    check_choice("norm_growth", norm_growth, ("conservative", "optimistic"))
    check_choice("flatten", flatten, ("hadamard", "dft"))
    check_choice("method", method, ("rdp", "zcdp"))
    steps = check_positive_int("steps", steps)
    if 4**bits < n * k * k:
        raise ValueError(
            f"no valid gamma: 2^(2*bits) = {4**bits} < n*k^2 = {n * k * k:g} (bits={bits}, n={n}, k={k}); "
            "the rounding noise of n clients alone exceeds the modular range; use more bits or a smaller k"
        )
    d_pad = flattened_dim(d, flatten)
    return bits, k, n, d, d_pad, c, epsilon, delta, beta, steps


def ddg_params(
    bits: int,
    k: float,
    n: int,
    d: int,
    c: float,
    epsilon: float,
    delta: float,
    beta: float = DEFAULT_BETA,
    *,
    norm_growth: str = "conservative",
    flatten: str = "hadamard",
    method: str = "rdp",
    steps: int = 1,
    rho: float = 1.0,
    n_signal: int | None = None,
    sampling_rate: float = 1.0,
    amplification: str = "poisson",
    sampling: str = "fixed",
    population: int | None = None,
) -> DDGParams:
    r"""Choose :math:`\gamma` and :math:`\sigma` from (bits, k, n, d, c, ε, δ) as in [KLS21]_'s code.

    Solves :math:`2^B\gamma = 2k\sqrt{\rho c^2 n_f/d' + (\gamma^2/4 + \sigma(\gamma)^2)n}` for
    :math:`\gamma` by root finding, where :math:`\sigma(\gamma)` is calibrated to the target
    ε by :func:`fedbandit.accounting.ddg.ddg_sigma_for_epsilon`.

    ``n_signal`` (default ``n``) is the number of clipped, rounded vectors in one aggregate
    when it differs from the number ``n`` of parties that add noise: in the bandit
    protocol (:class:`the ``ddg-secagg`` protocol (fedbandit.protocols.statistics.DiscreteGaussianTree)`) every *user* record is
    rounded and ``n`` *agents* add noise to the sum of their users' records.  The range
    condition is then :math:`2^B\gamma = 2k\sqrt{\rho c^2 n_f/d' + n_s\gamma^2/4 + n\sigma^2}`
    with :math:`n_f = n_s^2` (conservative) or :math:`n_s` (optimistic) [derived: the same
    variance bound with the rounding and noise terms counted separately].

    ``sampling_rate`` and ``amplification``: the releases sum a random sample of ``n`` of
    the clients (:func:`ddg_epsilon`); σ is calibrated with the subsampled accounting, as
    the authors' code does for federated learning.  ``sampling="poisson"`` and
    ``population`` N: every client joins each round with probability ``sampling_rate``;
    ``n`` is the number K of noise shares dealt over a round's clients
    (:meth:`DDGParams.noise_shares`), ``n_signal`` the expected number of clients.

    Parameters
    ----------
    bits : int
        Bits per coordinate B.
    k : float
        Aggregate standard deviations the modular range covers.
    n : int
        Clients that add noise.
    d : int
        The input dimension.
    c : float
        The clipping norm.
    epsilon, delta : float
        The target (ε, δ).
    beta : float, default exp(-1/2)
        The conditional rounding parameter.
    norm_growth : {"conservative", "optimistic"}, default "conservative"
        n_f = n_s² or n_s.
    flatten : {"hadamard", "dft"}, default "hadamard"
        The flattener (sets d′).
    steps : int, default 1
        Releases composed.
    method : {"rdp", "zcdp"}, default "rdp"
        The accounting (:func:`ddg_epsilon`).
    rho : float, default 1.0
        The flatness constant ρ.
    n_signal : int, optional
        n_s, the rounded vectors per aggregate (default ``n``).
    sampling_rate : float, default 1.0
        q of each release.
    amplification : {"poisson", "without-replacement"}, default "poisson"
        The subsampling (:func:`ddg_epsilon`).
    sampling : {"fixed", "poisson"}, default "fixed"
        How the rounds' clients are drawn; ``"poisson"``: ``n`` is the number of noise
        shares dealt over a round's clients (:meth:`DDGParams.noise_shares`).
    population : int or None
        N, the clients a Poisson round samples from (``sampling="poisson"`` only).

    Returns
    -------
    DDGParams

    Raises
    ------
    ValueError
        For bits < 2, k <= 0, c <= 0, beta outside [0, 1), and when no γ exists
        (``2**(2*bits) < n*k**2``, or the bit width is too small for the noise).
    """
    args = (bits, k, n, d, c, epsilon, delta, beta, norm_growth, flatten, method, steps, rho, n_signal, sampling_rate, amplification, sampling, population)
    try:
        hash(args)
    except TypeError:  # an unhashable argument: the solver's validation names it
        return _solve_ddg_params(*args)
    return _solve_ddg_params_cached(*args)


def _solve_ddg_params(bits: int, k: float, n: int, d: int, c: float, epsilon: float, delta: float, beta: float,
                      norm_growth: str, flatten: str, method: str, steps: int, rho: float, n_signal: int | None,
                      sampling_rate: float, amplification: str, sampling: str, population: int | None) -> DDGParams:
    """:func:`ddg_params` itself (positional arguments in its order)."""
    bits, k, n, d, d_pad, c, epsilon, delta, beta, steps = _check_common(
        bits, k, n, d, c, epsilon, delta, beta, norm_growth, flatten, method, steps
    )
    rho = check_positive_float("rho", rho)
    n_s = n if n_signal is None else check_positive_int("n_signal", n_signal)
    sampling_rate = check_float_in_range("sampling_rate", sampling_rate, 0.0, 1.0, low_inclusive=False)
    check_choice("amplification", amplification, ("poisson", "without-replacement"))
    check_choice("sampling", sampling, ("fixed", "poisson"))
    if sampling == "poisson":
        population = _check_poisson(method, amplification, population)
    elif population is not None:
        raise ValueError(f"population={population!r} is for sampling='poisson'; fixed-size rounds sum n={n} clients")
    if n_signal is not None and 4**bits < n_s * k * k:
        raise ValueError(
            f"no valid gamma: 2^(2*bits) = {4**bits} < n_signal*k^2 = {n_s * k * k:g} (bits={bits}); "
            "the rounding noise alone exceeds the modular range; use more bits or a smaller k"
        )
    m = float(1 << bits)
    n_f = float(n_s) ** 2 if norm_growth == "conservative" else float(n_s)

    def sigma_of(gamma: float) -> float:
        return ddg_sigma_for_epsilon(
            epsilon, c=c, gamma=gamma, beta=beta, n=n, d=d_pad, delta=delta, steps=steps, method=method,
            sampling_rate=sampling_rate, amplification=amplification, sampling=sampling, population=population,
        )

    def f(log_gamma: float) -> float:
        g = math.exp(log_gamma)
        s = sigma_of(g)
        return m * g - 2.0 * k * math.sqrt(rho * c * c * n_f / d_pad + g * g / 4.0 * n_s + s * s * n)

    # Start from the closed form with sigma at gamma -> 0 (no rounding inflation).
    s0 = sigma_of(1e-12 * c)
    g0 = 2.0 * k * math.sqrt(rho * c * c * n_f / d_pad + n * s0 * s0) / math.sqrt(max(m * m - n_s * k * k, 1.0))
    lo = hi = math.log(g0)
    tries = 0
    while f(lo) > 0:
        lo -= 1.0
        tries += 1
        if tries > 60:
            raise RuntimeError("could not bracket gamma from below")
    tries = 0
    while f(hi) < 0:
        hi += 1.0
        tries += 1
        if tries > 40:
            raise ValueError(
                f"no valid gamma for bits={bits}: the modular range 2^bits * gamma never covers "
                f"{k:g} standard deviations of the aggregate (epsilon={epsilon}, n={n}, d={d}, steps={steps}); use more bits"
            )
    log_gamma = optimize.brentq(f, lo, hi, xtol=1e-10, rtol=1e-10, maxiter=200)
    gamma = math.exp(log_gamma)
    sigma = sigma_of(gamma)
    return DDGParams(
        bits=bits,
        k=k,
        n=n,
        d=d,
        d_pad=d_pad,
        c=c,
        epsilon=epsilon,
        delta=delta,
        beta=beta,
        gamma=gamma,
        sigma=sigma,
        delta2=ddg_delta2(c, gamma, d_pad, beta),
        norm_growth=norm_growth,
        flatten=flatten,
        method=method,
        steps=steps,
        rho=rho,
        sampling_rate=sampling_rate,
        amplification=amplification,
        sampling=sampling,
        population=population,
    )


#: :func:`ddg_params` is a pure function of its arguments, and a page or a grid worker asks for the
#: same calibration many times (every seed of a configuration, every protocol configured alike): each
#: (typed) argument tuple is solved once per process.  The result is a frozen dataclass.
_solve_ddg_params_cached = functools.lru_cache(maxsize=1024, typed=True)(_solve_ddg_params)


def ddg_params_from_gamma(
    bits: int,
    gamma: float,
    sigma: float,
    n: int,
    d: int,
    c: float,
    delta: float,
    beta: float = DEFAULT_BETA,
    *,
    flatten: str = "hadamard",
    method: str = "rdp",
    steps: int = 1,
    k: float = 1.0,
) -> DDGParams:
    """Build :class:`DDGParams` from a given γ and σ (ε is computed, not targeted).

    Parameters
    ----------
    bits : int
        Bits per coordinate B.
    gamma : float
        γ.
    sigma : float
        σ (original units).
    n : int
        Clients that add noise.
    d : int
        The input dimension.
    c : float
        The clipping norm.
    delta : float
        δ.
    beta : float, default exp(-1/2)
        The conditional rounding parameter.
    flatten : {"hadamard", "dft"}, default "hadamard"
        The flattener.
    method : {"rdp", "zcdp"}, default "rdp"
        The accounting.
    steps : int, default 1
        Releases composed.
    k : float, default 1.0
        Aggregate standard deviations the modular range covers (recorded).

    Returns
    -------
    DDGParams
        With the computed ε.
    """
    gamma = check_positive_float("gamma", gamma)
    sigma = check_positive_float("sigma", sigma)
    bits, k, n, d, d_pad, c, _, delta, beta, steps = _check_common(
        bits, k, n, d, c, 1.0, delta, beta, "conservative", flatten, method, steps
    )
    eps = ddg_epsilon(sigma, c=c, gamma=gamma, beta=beta, n=n, d=d_pad, delta=delta, steps=steps, method=method)
    return DDGParams(
        bits=bits, k=k, n=n, d=d, d_pad=d_pad, c=c, epsilon=eps, delta=delta, beta=beta, gamma=gamma,
        sigma=sigma, delta2=ddg_delta2(c, gamma, d_pad, beta), flatten=flatten, method=method, steps=steps,
    )


def ddg_tree_params(
    bits: int | str,
    *,
    k: float,
    n_parties: int,
    n_agents: int,
    dim: int,
    clip: float,
    epsilon: float,
    delta: float,
    beta: float,
    norm_growth: str,
    flatten: str,
    steps: int,
    n_signal: int,
    rounding_share: float,
) -> DDGParams:
    """DDG parameters for a tree of ``steps`` node releases, with the bit width chosen if ``bits="auto"``.

    ``n_parties`` parties add noise to the aggregate the adversary sees (M under secure
    aggregation, 1 when it sees each party's message); ``n_signal`` user records are
    rounded into the largest node.  ``bits="auto"``: the smallest even width whose rounding
    variance n_signal·γ²/4 is at most ``rounding_share`` of the node's privacy-noise variance
    ``n_agents``·σ² [reconstruction: the book's rule; [KLS21] pick the width for a one-shot
    sum, whereas tree nodes grow with the users they hold].

    Parameters
    ----------
    bits : int or "auto"
        Bits per coordinate, or chosen (above).
    k : float
        Aggregate standard deviations the modular range covers.
    n_parties : int
        Parties whose noise is in what the adversary sees.
    n_agents : int
        Agents adding noise to a node.
    dim : int
        The input dimension.
    clip : float
        The clipping norm.
    epsilon, delta : float
        The target (ε, δ).
    beta : float
        The conditional rounding parameter.
    norm_growth : {"conservative", "optimistic"}
        How the node's norm grows.
    flatten : {"hadamard", "dft"}
        The flattener.
    steps : int
        The node releases a user's record enters.
    n_signal : int
        User records rounded into the largest node.
    rounding_share : float
        The rounding variance's allowed share of the noise variance (``bits="auto"``).

    Returns
    -------
    DDGParams
    """

    n_parties = _check_n(n_parties, "n_parties")
    n_agents = check_positive_int("n_agents", n_agents)
    dim = check_positive_int("dim", dim, max_value=MAX_STEPS, reason="the flattening works on vectors of dim entries")
    clip = check_positive_float("clip", clip)
    k = check_positive_float("k", k)
    n_signal = check_positive_int("n_signal", n_signal)
    rounding_share = check_positive_float("rounding_share", rounding_share)

    def params_for(b: int) -> DDGParams:
        return ddg_params(b, k, n_parties, dim, clip, epsilon, delta, beta, norm_growth=norm_growth, flatten=flatten,
                          steps=steps, n_signal=n_signal)

    if not (isinstance(bits, str) and bits == "auto"):
        return params_for(check_int_in_range("bits", bits, 2, 62))
    lowest = max(4, 2 * math.ceil(math.log2(n_signal * k**2) / 4) + 2)
    for b in range(lowest, 49, 2):
        try:
            params = params_for(b)
        except ValueError:  # this width cannot cover the aggregate at all: try a wider one
            continue
        if n_signal * params.gamma**2 / 4.0 <= rounding_share * n_agents * params.sigma**2:
            return params
    raise ValueError("bits='auto' found no width up to 48 bits; pass bits explicitly")
