r"""The accuracy of the distributed discrete Gaussian: Theorem 2 of Kairouz, Liu & Steinke [KLS21]_.

Theorem 2 [paper, asymptotic form]: with suitably chosen parameters the algorithm is
:math:`\tfrac12\varepsilon^2`-concentrated DP and its sum estimate :math:`A(x)` has

.. math:: \mathbb E\,\Big\|A(x) - \sum_i x_i\Big\|_2^2 = O\Big(\frac{c^2 d}{\varepsilon^2}\Big),

the error of the central Gaussian mechanism up to constants.  The paper's text gives the
proof's parameter conditions (privacy holds when :math:`\sigma \ge 2c/(\varepsilon\sqrt n)`,
:math:`(\sigma/\gamma)^2 \ge 8d/(\varepsilon^2 n)` and
:math:`20nd\,e^{-\pi^2(\sigma/\gamma)^2} \le \varepsilon^2/4`, with :math:`\beta = \min\{1/n, 1/2\}`)
but not the displayed constants of Theorem 36.  The book states two functions:

* :func:`theorem2_params` [derived]: the configuration Theorem 2's proof sets -- its σ and
  γ, :math:`\beta = \min\{1/n, 1/2\}`, and the fewest bits :math:`B` (:func:`theorem2_bits`) at
  which the proof's modular condition holds: with :math:`m = 2^B`,
  :math:`\gamma \ge (\hat\sigma/m)\sqrt{8\log(1 + m^2/n)}`, where
  :math:`\hat\sigma^2 = \rho c^2 n^2/d + (\gamma^2/4 + \sigma^2)n` bounds the aggregate coordinate's
  sub-Gaussian variance at :math:`\|\sum_i x_i\| \le nc` (the text of the proof of Theorem 2
  in [KLS21]_).  It is the theorem's own setting, not the book's calibration through
  Theorem 1 (:func:`fedbandit.accounting.ddg.ddg_params`), so an error measured there tests
  the theorem, and Theorem 1's ε at it tests the privacy half;
* :func:`theorem2_mse` [derived]: the privacy term :math:`dn\sigma^2` at the proof's
  :math:`\sigma = 2c/(\varepsilon\sqrt n)`, i.e. :math:`4c^2d/\varepsilon^2`, plus the rounding
  term :math:`dn\gamma^2/(4(1-\beta))` at the largest γ the proof allows -- the
  :math:`O(c^2d/\varepsilon^2)` of Theorem 2 with the constant 4 of its proof;
* :func:`ddg_mse_bound` [derived from the error decomposition of [KLS21]_ Sec. 4 (Props.
  23 and 35, Thm. 36)]: an upper bound on the error of *any* configured
  :class:`~fedbandit.accounting.ddg.DDGParams`, the sum of

  - privacy noise: :math:`n d' \sigma^2` (a discrete Gaussian of scale s has variance ≤ s²
    [CKS20]);
  - conditional randomized rounding: given the accepted event (probability ≥ 1 − β) each
    client's rounding error has second moment ≤ :math:`d'\gamma^2/(4(1-\beta))` and mean of
    norm ≤ :math:`\frac{\beta}{1-\beta}\gamma\sqrt{d'}` (its unconditional mean is 0 and its
    norm is always ≤ :math:`\gamma\sqrt{d'}`), so the n clients contribute
    :math:`n d'\gamma^2/(4(1-\beta)) + n(n-1)\big(\frac{\beta}{1-\beta}\big)^2\gamma^2 d'`;
  - modular clipping: an aggregate coordinate Y is :math:`\hat\sigma`-sub-Gaussian with
    :math:`\hat\sigma^2 = \rho\|\sum_i x_i\|^2/d' + n(\gamma^2/4 + \sigma^2)` ([KLS21]_ Prop. 35,
    as the paper's proof of Thm. 36 uses it); wrapping moves it by less than 2|Y| and only when |Y| > r = γm/2, so
    :math:`\mathbb E[(M(Y)-Y)^2] \le 4\sqrt{\mathbb E Y^4\,P(|Y|>r)} \le 16\sqrt2\,\hat\sigma^2 e^{-r^2/(4\hat\sigma^2)}`;

  combined by Minkowski's inequality, :math:`(\sqrt{A} + \sqrt{W})^2`.  The bound is over
  the d' flattened coordinates; the error on the d original ones (after unflattening and
  truncating the padding) is at most that.

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
.. [CKS20] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential
   privacy", NeurIPS 2020.
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit._combinatorics import flattened_dim
from fedbandit._validation import (
    MIN_DELTA,
    check_choice,
    check_epsilon,
    check_int_in_range,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
)
from fedbandit.accounting.ddg import DDGParams, ddg_delta2
from fedbandit.protocols import create

__all__ = ["theorem2_sigma", "theorem2_gamma", "theorem2_beta", "theorem2_bits", "theorem2_params", "theorem2_mse",
           "ddg_mse_bound", "ddg_mse_terms", "ddg_mean_mse_by_bits"]

#: Largest bit width :func:`theorem2_bits` searches (the modular arithmetic of the simulation is int64).
MAX_THEOREM2_BITS = 52


def theorem2_sigma(c: float, n: int, epsilon: float) -> float:
    r"""Per-client noise of Theorem 2's proof: :math:`\sigma = 2c/(\varepsilon\sqrt n)` ([KLS21]_, [paper]).

    Parameters
    ----------
    c : float
        The clipping norm c of each client's vector.
    n : int
        The number of clients.
    epsilon : float
        ε.

    Returns
    -------
    float
        σ.
    """
    c = check_positive_float("c", c)
    n = check_positive_int("n", n)
    epsilon = check_epsilon("epsilon", epsilon)
    return 2.0 * c / (epsilon * math.sqrt(n))


def theorem2_gamma(c: float, n: int, d: int, epsilon: float) -> float:
    r"""The largest γ meeting both γ conditions of Theorem 2's proof at :func:`theorem2_sigma` [paper].

    :math:`(\sigma/\gamma)^2 \ge 8d/(\varepsilon^2 n)` and
    :math:`(\sigma/\gamma)^2 \ge \log(80nd/\varepsilon^2)/\pi^2` (from :math:`20nd\,e^{-\pi^2(\sigma/\gamma)^2} \le \varepsilon^2/4`).

    Parameters
    ----------
    c : float
        The clipping norm c of each client's vector.
    n : int
        The number of clients.
    d : int
        The dimension.
    epsilon : float
        ε.

    Returns
    -------
    float
        γ.
    """
    d = check_positive_int("d", d)
    sigma = theorem2_sigma(c, n, epsilon)
    ratio2 = max(8.0 * d / (epsilon**2 * n), math.log(80.0 * n * d / epsilon**2) / math.pi**2, 0.0)
    return sigma / math.sqrt(ratio2)


def theorem2_beta(n: int) -> float:
    r"""Conditional rounding parameter of Theorem 2's proof: :math:`\beta = \min\{1/n, 1/2\}` [paper].

    Parameters
    ----------
    n : int
        Clients.

    Returns
    -------
    float
        β.
    """
    return min(1.0 / check_positive_int("n", n), 0.5)


def _theorem2_sigma_hat(c: float, n: int, d: int, sigma: float, gamma: float, rho: float) -> float:
    return math.sqrt(rho * c * c * n * n / d + (gamma * gamma / 4.0 + sigma * sigma) * n)


def theorem2_bits(c: float, n: int, d: int, epsilon: float, *, rho: float = 1.0) -> int:
    r"""The fewest bits B at which Theorem 2's modular condition holds at its σ and γ (module docstring).

    :math:`\gamma 2^B \ge \hat\sigma\sqrt{8\log(1 + 4^B/n)}`: the left side doubles with B, the
    right grows like :math:`\sqrt B`, so the smallest such B exists.

    Parameters
    ----------
    c, n, d, epsilon
        As in :func:`theorem2_params` (``d`` the padded dimension).
    rho : float, default 1
        The flattening's sub-Gaussian constant ρ.

    Returns
    -------
    int
        B.

    Raises
    ------
    ValueError
        When no B up to :data:`MAX_THEOREM2_BITS` meets it.
    """
    rho = check_positive_float("rho", rho)
    sigma, gamma = theorem2_sigma(c, n, epsilon), theorem2_gamma(c, n, d, epsilon)
    sigma_hat = _theorem2_sigma_hat(c, n, d, sigma, gamma, rho)
    for b in range(2, MAX_THEOREM2_BITS + 1):
        m = 2.0**b
        if gamma * m >= sigma_hat * math.sqrt(8.0 * math.log1p(m * m / n)):
            return b
    raise ValueError(f"Theorem 2's modular condition needs more than {MAX_THEOREM2_BITS} bits at c={c}, n={n}, d={d}, "
                     f"epsilon={epsilon}, rho={rho}")


def theorem2_params(c: float, n: int, d: int, epsilon: float, *, bits: int | None = None,
                    flatten: str = "hadamard") -> DDGParams:
    r"""The DDG configuration of Theorem 2's proof (:func:`theorem2_sigma`, :func:`theorem2_gamma`, :func:`theorem2_beta`).

    Parameters
    ----------
    c : float
        Clipping norm.
    n : int
        Clients.
    d : int
        Dimension; the theorem's σ and γ use the padded dimension of ``flatten``.
    epsilon : float
        The ε of Theorem 2's ½ε²-zCDP.
    bits : int or None
        Bit width; default :func:`theorem2_bits` (the fewest the proof's modular condition
        allows); fewer bits give a configuration outside the theorem.
    flatten : {"hadamard", "dft"}

    Returns
    -------
    DDGParams
        ``method="zcdp"``, ``epsilon`` the theorem's, ``k`` the standard deviations
        :math:`\gamma 2^B/(2\hat\sigma)` the modular range covers (δ is not used by zCDP:
        the smallest δ the package accepts is stored).
    """
    c = check_positive_float("c", c)
    n = check_positive_int("n", n)
    d = check_positive_int("d", d)
    epsilon = check_epsilon("epsilon", epsilon)
    flatten = check_choice("flatten", flatten, ("hadamard", "dft"))
    d_pad = flattened_dim(d, flatten)
    b = theorem2_bits(c, n, d_pad, epsilon) if bits is None else check_int_in_range("bits", bits, 2, MAX_THEOREM2_BITS)
    sigma, gamma, beta = theorem2_sigma(c, n, epsilon), theorem2_gamma(c, n, d_pad, epsilon), theorem2_beta(n)
    k = gamma * 2.0**b / (2.0 * _theorem2_sigma_hat(c, n, d_pad, sigma, gamma, 1.0))
    return DDGParams(bits=b, k=k, n=n, d=d, d_pad=d_pad, c=c, epsilon=epsilon, delta=MIN_DELTA, beta=beta, gamma=gamma,
                     sigma=sigma, delta2=ddg_delta2(c, gamma, d_pad, beta), flatten=flatten, method="zcdp")


def theorem2_mse(c: float, n: int, d: int, epsilon: float) -> float:
    r"""Theorem 2's error of the sum with the proof's parameters [derived]: :math:`4c^2d/\varepsilon^2 + dn\gamma^2/(4(1-\beta))`.

    β = min{1/n, 1/2} and γ = :func:`theorem2_gamma`; the first term (privacy) dominates:
    the :math:`O(c^2d/\varepsilon^2)` of the theorem.  (The modular-clipping term is assumed
    negligible: the theorem's bit width is chosen so.)

    Parameters
    ----------
    c : float
        The clipping norm c of each client's vector.
    n : int
        The number of clients.
    d : int
        The dimension.
    epsilon : float
        ε.

    Returns
    -------
    float
        The mean squared error of the sum.
    """
    n = check_positive_int("n", n)
    d = check_positive_int("d", d)
    beta = min(1.0 / n, 0.5)
    sigma = theorem2_sigma(c, n, epsilon)
    gamma = theorem2_gamma(c, n, d, epsilon)
    return d * n * sigma**2 + d * n * gamma**2 / (4.0 * (1.0 - beta))


def ddg_mse_terms(params, *, sum_norm: float | None = None) -> dict:
    """The terms of :func:`ddg_mse_bound` (noise, rounding variance, rounding bias, wrap), each an error of the sum.

    Parameters
    ----------
    params : DDGParams
        From :func:`fedbandit.accounting.ddg.ddg_params`.
    sum_norm : float, optional
        A bound on the sum's norm (default n c).

    Returns
    -------
    dict
        ``noise``, ``rounding_variance``, ``rounding_bias``, ``wrap``: each an error of the sum.
    """
    if not isinstance(params, DDGParams):
        raise TypeError(f"params must be a fedbandit.accounting.ddg.DDGParams, got {type(params).__name__}")
    p = params
    n, d, g, s, b = p.n, p.d_pad, p.gamma, p.sigma, p.beta
    norm = n * p.c if sum_norm is None else check_nonnegative_float("sum_norm", sum_norm)
    ratio = b / (1.0 - b)
    sigma_hat2 = p.rho * norm**2 / d + n * (g * g / 4.0 + s * s)
    r = g * p.modulus / 2.0
    wrap = d * 16.0 * math.sqrt(2.0) * sigma_hat2 * math.exp(-(r * r) / (4.0 * sigma_hat2))
    return {
        "noise": n * d * s * s,
        "rounding_variance": n * d * g * g / (4.0 * (1.0 - b)),
        "rounding_bias": n * (n - 1) * ratio**2 * g * g * d,
        "wrap": wrap,
    }


def ddg_mse_bound(params, *, sum_norm: float | None = None) -> float:
    r"""Upper bound on :math:`\mathbb E\|A(x) - \sum_i x_i\|^2` for a configured DDG ([derived], module docstring).

    Parameters
    ----------
    params : DDGParams
        From :func:`fedbandit.accounting.ddg.ddg_params` (n clients, padded dimension d',
        γ, σ, β, bits, flatness ρ).
    sum_norm : float, optional
        A bound on :math:`\|\sum_i x_i\|` (default the conservative :math:`nc`).

    Returns
    -------
    float
        :math:`(\sqrt{\text{noise} + \text{rounding}} + \sqrt{\text{wrap}})^2` (:func:`ddg_mse_terms`).
    """
    t = ddg_mse_terms(params, sum_norm=sum_norm)
    a = t["noise"] + t["rounding_variance"] + t["rounding_bias"]
    return (math.sqrt(a) + math.sqrt(t["wrap"])) ** 2


def ddg_mean_mse_by_bits(epsilon: float, k: float, n: int, *, dim: int, clip: float, delta: float = 1e-5,
                         max_bits: int = 20) -> tuple[np.ndarray, np.ndarray, float]:
    r"""Predicted error per coordinate of the mean of n clients' vectors: DDG at each bit width, and the Gaussian.

    For each bit width B from the fewest that holds k standard deviations of the sum
    (:math:`\lceil\log_2(\sqrt n\,k)\rceil + 1`, at least 5) to ``max_bits``, the
    ``sum-ddg-secagg`` protocol's calibration (one round) at (ε, δ) gives the per-client
    noise scale σ₀ and the rounding granularity γ; the prediction is the noise and rounding
    variance of the sum per coordinate over n², :math:`(\sigma_0^2 + \gamma^2/4)/n`
    ([derived]: the ``noise`` and ``rounding_variance`` terms of :func:`ddg_mse_terms` per
    coordinate, with β → 0 and without the rounding bias and the wrap-around, which the
    calibration keeps small; NaN where the protocol refuses the bit width).  The analytic
    Gaussian's is the ``sum-central-gaussian`` protocol's noise variance over n².

    Parameters
    ----------
    epsilon : float
        ε of the target (ε, δ).
    k : float
        Standard deviations of the sum the modular range holds.
    n : int
        The number of clients.
    dim : int
        d, the vectors' dimension.
    clip : float
        c, the clipping norm.
    delta : float, default 1e-5
        δ.
    max_bits : int, default 20
        The largest bit width.

    Returns
    -------
    bits : numpy.ndarray of int
        The bit widths.
    mse : numpy.ndarray
        DDG's predicted error per coordinate of the mean at each (NaN where refused).
    gaussian_mse : float
        The analytic Gaussian's.
    """
    n = check_positive_int("n", n)
    k = check_positive_float("k", k)
    max_bits = check_positive_int("max_bits", max_bits, max_value=62, reason="the modular sum is int64")
    bs = np.arange(max(4, int(np.ceil(np.log2(np.sqrt(n) * k))) + 1), max_bits + 1)
    setting = dict(n_parties=n, dim=dim, n_rounds=1, clip=clip)
    pred = []
    for b in bs:
        try:
            cal = create("sum-ddg-secagg", epsilon=epsilon, delta=delta, bits=int(b), k=k).configure(**setting).calibration()
            pred.append((cal["sigma0"] ** 2 + cal["gamma"] ** 2 / 4) / n)  # sigma0: one client's noise scale
        except ValueError:
            pred.append(np.nan)
    g = create("sum-central-gaussian", epsilon=epsilon, delta=delta).configure(**setting).noise_std() ** 2 / n**2
    return bs, np.array(pred), g
