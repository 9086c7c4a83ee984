r"""Amplification by subsampling in Rényi DP: the clients sampled each round of federated learning.

Federated learning samples a few clients from a population of N every round; an analyst
who sees only the released model (not who was sampled) then learns less about one client
than from a round with everyone in it.  Kairouz, Liu & Steinke [KLS21]_ (Sec. 6.2.3)
account for this in Rényi DP [Mir17]_, per round, then compose over the T rounds and
convert to (ε, δ):

* **Poisson subsampling** (each client joins a round independently with probability q),
  neighbouring populations differ by **adding or removing** one client:

  - the continuous Gaussian: the RDP of the sampled Gaussian mechanism of Mironov,
    Talwar & Zhang [MTZ19]_, exact at integer orders α,
    :math:`\varepsilon(\alpha) = \frac{1}{\alpha-1}\log\sum_{k=0}^{\alpha}\binom{\alpha}{k}(1-q)^{\alpha-k}q^k
    e^{(k^2-k)/(2z^2)}` with noise multiplier z = σ/Δ (:func:`sampled_gaussian_rdp`), and an
    upper bound at fractional orders (the two series of [MTZ19]_ Sec. 3.3, see
    :func:`sampled_gaussian_rdp`); it is accounted on :data:`SAMPLED_GAUSSIAN_ORDERS`,
    which contain dp-accounting's default RDP orders (fractional 1.1–10.9 among them), so the
    book's ε is never looser than dp-accounting's ``PoissonSampledDpEvent(q, GaussianDpEvent(z))``
    with its RDP accountant (checked in the tests on a grid of z, q, T, δ);
  - any mechanism with a known RDP curve ε(·), in particular the distributed discrete
    Gaussian (Prop. 14): the *generic* upper bound of Zhu & Wang [ZW19]_ Theorem 5
    (:func:`poisson_subsampled_rdp`), at integer α,

    .. math:: \varepsilon'(\alpha) = \frac{1}{\alpha-1}\log\Big((1-q)^{\alpha-1}(\alpha q - q + 1)
       + \binom{\alpha}{2}q^2(1-q)^{\alpha-2}e^{\varepsilon(2)}
       + 3\sum_{l=3}^{\alpha}\binom{\alpha}{l}(1-q)^{\alpha-l}q^l e^{(l-1)\varepsilon(l)}\Big),

    the bound the paper names and its authors' code computes; the tests check it is never below
    the exact sampled-Gaussian RDP.

* **Sampling without replacement** (exactly n = qN clients per round), neighbouring
  populations of the same size N differ by **replacing** one client's data: Wang, Balle &
  Kasiviswanathan [WBK19]_ Theorem 9 for any mechanism whose replace-one RDP ε(·) is
  known and unbounded at α = ∞ (:func:`without_replacement_rdp`),

  .. math:: \varepsilon'(\alpha) \le \frac{1}{\alpha-1}\log\Big(1 + q^2\binom{\alpha}{2}
     \min\{4(e^{\varepsilon(2)}-1),\, 2e^{\varepsilon(2)}\}
     + 2\sum_{j=3}^{\alpha} q^j\binom{\alpha}{j} e^{(j-1)\varepsilon(j)}\Big)

  (checked against dp-accounting's ``SampledWithoutReplacementDpEvent`` in the tests).

Both bounds are also capped by ε(α) itself (subsampling never hurts: the subsampled
output is a mixture coupled on the same sample, and Rényi divergence is jointly
quasi-convex).  The paper samples a *fixed* number of clients per round ("without
replacement within each round, and with replacement across rounds", Sec. 6.2.3) but
accounts with the Poisson bounds at q = n/N, as TensorFlow Federated does; no theorem
covers that pairing, so the sum protocols (:mod:`fedbandit.protocols.sums`) report it
with status "unproven" and offer the verified pairings (Poisson sampling with
add/remove; fixed-size sampling with replace-one, :data:`SAMPLING_RELATIONS`).  The
distributed discrete Gaussian on Poisson samples has a tighter account than the generic
bound: the sampled Gaussian that dominates it (:mod:`fedbandit.accounting.sampled_ddg`).

The RDP → (ε, δ) conversion is the optimal one of Canonne, Kamath & Steinke
(:func:`fedbandit.accounting.zcdp.rdp_to_approx_dp`) on :data:`SUBSAMPLING_ORDERS` (the
generic bounds) or :data:`SAMPLED_GAUSSIAN_ORDERS` (the sampled Gaussian).

References
----------
.. [KLS21] P. Kairouz, Z. Liu and T. Steinke, "The distributed discrete Gaussian
   mechanism for federated learning with secure aggregation", ICML 2021.
.. [Mir17] I. Mironov, "Rényi differential privacy", CSF 2017.
.. [MTZ19] I. Mironov, K. Talwar and L. Zhang, "Rényi differential privacy of the sampled
   Gaussian mechanism", arXiv:1908.10530, 2019.
.. [ZW19] Y. Zhu and Y.-X. Wang, "Poisson subsampled Rényi differential privacy",
   ICML 2019.
.. [WBK19] Y.-X. Wang, B. Balle and S. Kasiviswanathan, "Subsampled Rényi differential
   privacy and analytical moments accountant", AISTATS 2019.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from fedbandit._validation import (
    MAX_COUNT,
    MAX_MAGNITUDE,
    check_array,
    check_callable,
    check_choice,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_positive_float,
    check_positive_int,
)
from fedbandit.accounting._roots import decreasing_root
from fedbandit.accounting.zcdp import over_sigma_squared, rdp_to_approx_dp

__all__ = [
    "SUBSAMPLING_ORDERS",
    "SAMPLED_GAUSSIAN_ORDERS",
    "AMPLIFICATIONS",
    "SAMPLING_SCHEMES",
    "SAMPLING_RELATIONS",
    "amplification_for",
    "sampled_gaussian_rdp",
    "poisson_subsampled_rdp",
    "without_replacement_rdp",
    "subsampled_rdp",
    "subsampled_epsilon",
    "sampled_gaussian_epsilon",
    "sampled_gaussian_noise_multiplier",
]

#: Integer RDP orders of the subsampled accounting (the generic bounds need integer α).
SUBSAMPLING_ORDERS = np.array(list(range(2, 65)) + [72, 80, 96, 112, 128, 160, 192, 224, 256, 384, 512],
                              dtype=np.float64)

#: RDP orders of the Poisson-sampled Gaussian (:func:`sampled_gaussian_epsilon`): the integer
#: :data:`SUBSAMPLING_ORDERS` plus 1024 and the fractional orders 1 + x/10 (x = 1..99) — a superset of
#: dp-accounting's ``DEFAULT_RDP_ORDERS`` (1 + x/10, 11..63, 128, 256, 512, 1024), so the minimum over
#: orders is never above dp-accounting's, and never above the integer-only accounting.
SAMPLED_GAUSSIAN_ORDERS = np.array(sorted(set([1.0 + x / 10.0 for x in range(1, 100)])
                                          | set(SUBSAMPLING_ORDERS.tolist()) | {1024.0}), dtype=np.float64)

#: The amplification bounds: Poisson subsampling (add/remove) and sampling without replacement (replace-one).
AMPLIFICATIONS = ("poisson", "without-replacement")

#: How the clients of a round are chosen: each independently with probability q, or exactly n = qN of N.
SAMPLING_SCHEMES = ("poisson", "fixed")

#: The neighbouring relation under which each sampling scheme's amplification is proven.
SAMPLING_RELATIONS = {"poisson": "add-remove", "fixed": "replace"}


def amplification_for(relation: str) -> str:
    """The amplification bound used for a neighbouring relation: Poisson (add/remove) or WBK19 (replace).

    Parameters
    ----------
    relation : {"add-remove", "replace"}

    Returns
    -------
    str
        "poisson" or "without-replacement".
    """
    relation = check_choice("relation", relation, ("add-remove", "replace"))
    return "poisson" if relation == "add-remove" else "without-replacement"


#: Largest RDP order accepted: the generic bounds sum max(orders) terms per order (a table of
#: len(orders) × max(orders) entries), and no useful conversion needs orders beyond a few hundred.
MAX_ORDER = 4096


def _check_orders(orders: ArrayLike) -> np.ndarray:
    if isinstance(orders, (str, bytes, dict, set)) or orders is None:
        raise TypeError(f"orders must be an array of integers >= 2, got {orders!r:.80}")
    a = np.atleast_1d(check_array("orders", orders, dtype=np.float64))
    if a.size and np.any(a > MAX_ORDER):
        raise ValueError(f"orders must be at most {MAX_ORDER} (the bounds sum that many terms per order), got {orders!r:.80}")
    if a.ndim != 1 or a.size == 0 or np.any(a < 2) or np.any(a != np.round(a)):
        raise ValueError(f"orders must be integers >= 2 (the subsampling bounds are stated at integer orders), got {orders!r}")
    return a


def _check_q(q: float) -> float:
    return check_float_in_range("q", q, 0.0, 1.0, low_inclusive=False, high_inclusive=True)


def _log_comb(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    return special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)


def _base_values(base_rdp: Callable, max_order: int) -> np.ndarray:
    """ε(l) for l = 0..max_order (entries 0 and 1 unused)."""
    check_callable("base_rdp", base_rdp)
    ls = np.arange(2, max_order + 1, dtype=np.float64)
    vals = np.asarray(base_rdp(ls), dtype=np.float64)
    if vals.shape != ls.shape or np.any(np.isnan(vals)) or np.any(vals < 0):
        raise ValueError("base_rdp must map an array of orders to non-negative RDP values of the same shape")
    return np.concatenate([[0.0, 0.0], vals])


def _check_real_orders(orders: ArrayLike) -> np.ndarray:
    if isinstance(orders, (str, bytes, dict, set)) or orders is None:
        raise TypeError(f"orders must be an array of numbers > 1, got {orders!r:.80}")
    a = np.atleast_1d(check_array("orders", orders, dtype=np.float64))
    if a.ndim != 1 or a.size == 0 or np.any(~(a > 1.0)):
        raise ValueError(f"orders must be a non-empty 1-d array of numbers > 1, got {orders!r:.80}")
    if np.any(a > MAX_ORDER):
        raise ValueError(f"orders must be at most {MAX_ORDER} (the sums have that many terms per order), got {orders!r:.80}")
    return a


#: Terms summed exactly in each series of the fractional-order sampled-Gaussian RDP beyond the point
#: (max(z0, α − z0)) from which the tail bound of :func:`_log_a_frac` holds.
_FRAC_TERMS = 1000
#: Beyond this z0 the fractional orders are not summed (their value is then the Gaussian's own α/(2z²),
#: a valid cap); the integer orders stay exact, so ε is never looser than the integer-order accounting.
_FRAC_MAX_START = 20_000.0


def _logsumexp_1d(a: np.ndarray, b: np.ndarray | None = None) -> tuple[float, float]:
    """``scipy.special.logsumexp(a, b=b, return_sign=True)`` for 1-d float64 arrays, step for step (scipy 1.17).

    The same operations on the same arrays, so the same floats (``tests/test_subsampling.py`` compares the two
    bit for bit): the largest terms are taken out of the sum (their weights summed into m) and the rest summed as
    log1p(Σ b·exp(a − max) / m) + log m + max, and a non-finite result is replaced by log|Σ b·exp(a)|.  Without
    scipy's array-API dispatch, which costs ~0.4 ms a call: the fractional-order RDP calls it once per order
    (90 orders per ε evaluation, ~30 evaluations to calibrate one noise multiplier).
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a0 = a
        if b is not None:  # a zero weight adds nothing, whatever its term
            a = np.where(b == 0, -np.inf, a)
        a_max = np.max(a)
        top = a == a_max
        rest = np.where(top, -np.inf, a)
        m = np.sum(top, dtype=np.float64) if b is None else np.sum(b * top, dtype=np.float64)
        e = np.exp(rest - a_max) if b is None else b * np.exp(rest - a_max)
        s = np.sum(e, dtype=np.float64)
        if s != 0:
            s = s / m
        sgn = np.sign(s + 1) * np.sign(m)
        if s < -1:
            s = -s - 2
        out = np.log1p(s) + np.log(np.abs(m)) + a_max
        if not np.isfinite(out):  # scipy's direct formula for infinite or undefined results
            total = np.sum(np.exp(a0) if b is None else b * np.exp(a0))
            out, sgn = np.log(np.abs(total)), np.sign(total)
    return float(out), float(sgn)


def _log_a_frac(alpha: float, q: float, z: float) -> float:
    r"""log A_α of the Poisson-sampled Gaussian at a fractional order α > 1, an upper bound ([MTZ19]_ Sec. 3.3).

    With :math:`z_0 = z^2\log(1/q - 1) + 1/2` (where the two Gaussians' likelihood ratio,
    weighted by q/(1 − q), crosses 1), the binomial series of :math:`(1 - q + q\,r(x))^\alpha` converges on
    each side of z0, and [MTZ19]_ Sec. 3.3 gives :math:`A_\alpha = A_0 + A_1`,

    .. math:: A_0 = \sum_{i\ge0}\binom{\alpha}{i} q^i(1-q)^{\alpha-i} e^{(i^2-i)/(2z^2)}\,\Phi\big((z_0-i)/z\big),\quad
       A_1 = \sum_{i\ge0}\binom{\alpha}{i} q^{\alpha-i}(1-q)^{i} e^{(j^2-j)/(2z^2)}\,\Phi\big((j-z_0)/z\big),\ j=\alpha-i.

    Summed here with the signed coefficients (for i > α they alternate; dp-accounting's
    ``_compute_log_a_frac`` sums their absolute values, which is looser) in log space, over
    i = 0..N with N = max(z0, α − z0) + 1000, plus a bound on the absolute value of the rest:
    for i > N both Φ arguments are −x with x ≥ x_min = (N + 1 − max(z0, α − z0))/z > 0, and
    Mills' ratio Φ(−x) ≤ e^{−x²/2}/(x√(2π)) makes every term of either series at most
    :math:`|\binom{\alpha}{i}|(1-q)^\alpha e^{-z_0^2/(2z^2)}/(x_{\min}\sqrt{2\pi})`, and
    :math:`\sum_{i>N}|\binom{\alpha}{i}| = (N+1)|\binom{\alpha}{N+1}|/\alpha` (telescoping the ratio
    (i − α)/(i + 1) of consecutive terms).  So the result is an upper bound on log A_α, hence sound.
    """
    z0 = z * z * (math.log1p(-q) - math.log(q)) + 0.5
    start = max(z0, alpha - z0, 0.0)
    if start > _FRAC_MAX_START:  # z² log(1/q − 1) huge: too many terms; the caller's cap α/(2z²) applies
        return math.inf
    n = int(math.ceil(start)) + _FRAC_TERMS
    i = np.arange(n + 1, dtype=np.float64)
    j = alpha - i
    with np.errstate(divide="ignore", invalid="ignore"):
        lc = special.gammaln(alpha + 1.0) - special.gammaln(i + 1.0) - special.gammaln(j + 1.0)
    lq, l1q = math.log(q), math.log1p(-q)
    s0 = lc + i * lq + j * l1q + (i * i - i) / (2.0 * z * z) + special.log_ndtr((z0 - i) / z)
    s1 = lc + j * lq + i * l1q + (j * j - j) / (2.0 * z * z) + special.log_ndtr((j - z0) / z)
    m = n + 1.0
    lc_next = special.gammaln(alpha + 1.0) - special.gammaln(m + 1.0) - special.gammaln(alpha - m + 1.0)
    x_min = (m - max(z0, alpha - z0)) / z  # ≥ 1000/z > 0: the smallest |Φ argument| in either tail
    tail = (math.log(2.0) + alpha * l1q - z0 * z0 / (2.0 * z * z) + lc_next + math.log(m / alpha)
            - math.log(math.sqrt(2.0 * math.pi) * x_min))
    # sign of C(α, i): one negative factor (α − k) for each k = ⌊α⌋+1 .. i−1
    sign = np.where(np.maximum(i - 1.0 - math.floor(alpha), 0.0) % 2 == 0, 1.0, -1.0)
    head, head_sign = _logsumexp_1d(np.concatenate([s0, s1]), np.concatenate([sign, sign]))
    if head_sign <= 0:  # cannot happen for the true partial sums (A_α ≥ 1 > tail); refuse rather than guess
        return math.inf
    return float(np.logaddexp(head, tail))


def sampled_gaussian_rdp(orders: ArrayLike, q: float, noise_multiplier: float) -> np.ndarray:
    r"""RDP of the Poisson-sampled Gaussian mechanism ([MTZ19]_ Sec. 3.3): exact at integer orders, a bound at others.

    Parameters
    ----------
    orders : array_like of float
        Orders α > 1 (integer or fractional).
    q : float
        Sampling probability in (0, 1].
    noise_multiplier : float
        z = σ/Δ, the noise standard deviation over the ℓ2 sensitivity (add/remove one record).

    Returns
    -------
    ndarray
        :math:`\varepsilon(\alpha) = \log A_\alpha/(\alpha-1)`; at integer α
        :math:`A_\alpha = \sum_k \binom{\alpha}{k}(1-q)^{\alpha-k}q^k e^{(k^2-k)/(2z^2)}` exactly, at
        fractional α the two-series upper bound of :func:`_log_a_frac`; at q = 1 the Gaussian's
        :math:`\alpha/(2z^2)`.  Every value is capped by the Gaussian's α/(2z²) (subsampling never hurts).
    """
    alpha = _check_real_orders(orders)
    q = _check_q(q)

    z = check_positive_float("noise_multiplier", noise_multiplier)
    z2 = z * z  # (x / (2z²) is x / (2.0 * z * z) bit for bit: doubling is exact; +inf once z² underflows)
    if q == 1.0:
        return over_sigma_squared(alpha, 2.0, z, z2)
    out = np.empty_like(alpha)
    for i, a in enumerate(alpha):
        if a == round(a):
            k = np.arange(a + 1)
            terms = _log_comb(a, k) + (a - k) * math.log1p(-q) + k * math.log(q) + over_sigma_squared(k * k - k, 2.0, z, z2)
            out[i] = _logsumexp_1d(terms)[0] / (a - 1.0)
        elif not math.isfinite(z2) or z2 == 0.0 or 1.0 / z2 > MAX_MAGNITUDE:
            out[i] = math.inf  # the Gaussian's own RDP is infinite (capped below)
        else:
            out[i] = _log_a_frac(float(a), q, z) / (a - 1.0)
    # the RDP is >= 0; at a huge z the log-sum-exp can round to -1e-15
    return np.clip(out, 0.0, over_sigma_squared(alpha, 2.0, z, z2))


@functools.lru_cache(maxsize=16)
def _log_comb_table(orders: tuple) -> tuple[np.ndarray, np.ndarray]:
    """log C(α, l) for every order α (rows) and l = 0..max α (columns; −inf where l > α), and l."""
    alpha = np.asarray(orders, dtype=np.float64)[:, None]
    ls = np.arange(int(max(orders)) + 1, dtype=np.float64)[None, :]
    with np.errstate(invalid="ignore"):
        table = np.where(ls <= alpha, _log_comb(alpha, np.minimum(ls, alpha)), -np.inf)
    return table, ls[0]


def _subsampling_inputs(orders: ArrayLike, q: float, base_rdp: Callable[..., Any]) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """Checked orders α and rate q, the base curve ε(1..max α) and its values at α (both theorems')."""
    alpha = _check_orders(orders)
    q = _check_q(q)
    eps = _base_values(base_rdp, int(alpha.max()))
    return alpha, q, eps, eps[alpha.astype(int)]


def poisson_subsampled_rdp(orders: ArrayLike, q: float, base_rdp: Callable[..., Any]) -> np.ndarray:
    r"""Generic RDP bound of a Poisson-subsampled mechanism ([ZW19]_ Theorem 5), add/remove one record.

    Parameters
    ----------
    orders : array_like of int
        Orders α ≥ 2.
    q : float
        Sampling probability in (0, 1].
    base_rdp : callable
        ε(·) of the mechanism run on the sample: maps an array of orders to RDP values.

    Returns
    -------
    ndarray
        The bound of the module docstring, capped by ε(α).
    """
    alpha, q, eps, base = _subsampling_inputs(orders, q, base_rdp)
    if q == 1.0:
        return base
    table, ls = _log_comb_table(tuple(alpha.tolist()))
    lq, l1q = math.log(q), math.log1p(-q)
    a = alpha[:, None]
    # l >= 3: log 3 + log C(α, l) + (α − l) log(1 − q) + l log q + (l − 1) ε(l)
    terms = math.log(3.0) + table + (a - ls) * l1q + ls * lq + (ls - 1.0) * eps[None, :]
    terms[:, :3] = -np.inf
    first = (alpha - 1.0) * l1q + np.log(alpha * q - q + 1.0)
    second = np.log(alpha * (alpha - 1.0) / 2.0) + 2.0 * lq + (alpha - 2.0) * l1q + eps[2]
    terms[:, 0], terms[:, 1] = first, second
    out = special.logsumexp(terms, axis=1) / (alpha - 1.0)
    return np.minimum(np.maximum(out, 0.0), base)  # >= 0: at a tiny q the log-sum-exp can round below 0


def without_replacement_rdp(orders: ArrayLike, q: float, base_rdp: Callable[..., Any]) -> np.ndarray:
    r"""Generic RDP bound of sampling a fixed-size subset without replacement ([WBK19]_ Theorem 9), replace-one.

    Parameters
    ----------
    orders : array_like of int
        Orders α ≥ 2.
    q : float
        Sampling ratio n/N in (0, 1].
    base_rdp : callable
        The *replace-one* RDP ε(·) of the mechanism run on the sample (unbounded at α = ∞,
        as for Gaussian-type noise).

    Returns
    -------
    ndarray
        The bound of the module docstring, capped by ε(α).
    """
    alpha, q, eps, base = _subsampling_inputs(orders, q, base_rdp)
    if q == 1.0:
        return base
    table, ls = _log_comb_table(tuple(alpha.tolist()))
    lq = math.log(q)
    # log min{4(e^{ε(2)} − 1), 2 e^{ε(2)}}
    e2 = eps[2]
    log_4expm1 = -math.inf if e2 <= 0 else (math.log(4.0) + e2 + math.log(-math.expm1(-e2)) if e2 > 30
                                            else math.log(4.0 * math.expm1(e2)))
    log_second = min(log_4expm1, math.log(2.0) + e2)
    terms = math.log(2.0) + ls * lq + table + (ls - 1.0) * eps[None, :]
    terms[:, :3] = -np.inf
    terms[:, 0] = 0.0
    terms[:, 1] = 2.0 * lq + np.log(alpha * (alpha - 1.0) / 2.0) + log_second
    out = special.logsumexp(terms, axis=1) / (alpha - 1.0)
    return np.minimum(np.maximum(out, 0.0), base)  # >= 0: at a tiny q the log-sum-exp can round below 0


def subsampled_rdp(orders: ArrayLike, q: float, base_rdp: Callable[..., Any], amplification: str = "poisson") -> np.ndarray:
    """:func:`poisson_subsampled_rdp` (``"poisson"``) or :func:`without_replacement_rdp` (``"without-replacement"``).

    Parameters
    ----------
    orders : array_like of int
        Orders α ≥ 2.
    q : float
        The sampling probability in (0, 1].
    base_rdp : callable
        ε(·) of the mechanism run on the sample.
    amplification : {"poisson", "without-replacement"}, default "poisson"
        The subsampling bound.

    Returns
    -------
    ndarray
        The subsampled RDP at each order.
    """
    amplification = check_choice("amplification", amplification, AMPLIFICATIONS)
    if amplification == "poisson":
        return poisson_subsampled_rdp(orders, q, base_rdp)
    return without_replacement_rdp(orders, q, base_rdp)


def subsampled_epsilon(base_rdp: Callable[..., Any], q: float, steps: int, delta: float, amplification: str = "poisson",
                       *, orders: ArrayLike | None = None) -> float:
    """(ε, δ) of ``steps`` subsampled rounds: the per-round bound composed and converted [CKS20].

    Parameters
    ----------
    base_rdp : callable
        ε(·) of the mechanism run on the sample.
    q : float
        The sampling probability in (0, 1].
    steps : int
        The rounds composed.
    delta : float
        The target δ.
    amplification : {"poisson", "without-replacement"}, default "poisson"
        The subsampling bound.
    orders : array_like, optional
        The orders (default :data:`SUBSAMPLING_ORDERS`).

    Returns
    -------
    float
        ε (inf when no order gives a finite bound).
    """
    check_callable("base_rdp", base_rdp)
    q = _check_q(q)
    amplification = check_choice("amplification", amplification, AMPLIFICATIONS)
    steps = check_positive_int("steps", steps, max_value=MAX_COUNT)
    delta = check_delta("delta", delta)
    orders = SUBSAMPLING_ORDERS if orders is None else _check_orders(orders)
    rdp = steps * subsampled_rdp(orders, q, base_rdp, amplification)
    finite = np.isfinite(rdp)
    if not finite.any():
        return math.inf
    return rdp_to_approx_dp(orders[finite], rdp[finite], delta)


def sampled_gaussian_epsilon(noise_multiplier: float, q: float, steps: int, delta: float,
                             amplification: str = "poisson") -> float:
    """ε at δ of ``steps`` rounds of the subsampled Gaussian with noise multiplier z = σ/Δ.

    ``"poisson"``: the sampled-Gaussian RDP [MTZ19]_ (add/remove) on :data:`SAMPLED_GAUSSIAN_ORDERS`
    (integer and fractional; at least as tight as dp-accounting's RDP accountant);
    ``"without-replacement"``: [WBK19]_ Thm. 9 on the Gaussian's RDP α/(2z²), where z is
    σ over the *replace-one* sensitivity.

    Parameters
    ----------
    noise_multiplier : float
        z = σ/Δ.
    q : float
        The sampling probability in (0, 1].
    steps : int
        The rounds composed.
    delta : float
        The target δ.
    amplification : {"poisson", "without-replacement"}, default "poisson"
        The subsampling bound.

    Returns
    -------
    float
        ε.
    """
    amplification = check_choice("amplification", amplification, AMPLIFICATIONS)
    z = check_positive_float("noise_multiplier", noise_multiplier)
    q = _check_q(q)
    steps = check_positive_int("steps", steps, max_value=MAX_COUNT)
    delta = check_delta("delta", delta)
    orders = SUBSAMPLING_ORDERS
    inv = 1.0 / z
    if inv * inv > MAX_MAGNITUDE:
        # the base Gaussian's RDP α/(2z²) leaves the float range (z < 1e-50): the bound gives no finite ε
        return math.inf
    if amplification == "poisson":
        orders = SAMPLED_GAUSSIAN_ORDERS
        rdp = steps * sampled_gaussian_rdp(orders, q, z)
        finite = np.isfinite(rdp)
        return rdp_to_approx_dp(orders[finite], rdp[finite], delta) if finite.any() else math.inf
    return subsampled_epsilon(lambda a: a / (2.0 * z * z), q, steps, delta, amplification)


def sampled_gaussian_noise_multiplier(epsilon: float, delta: float, q: float, steps: int,
                                      amplification: str = "poisson") -> float:
    """Smallest noise multiplier z = σ/Δ with :func:`sampled_gaussian_epsilon` ≤ ``epsilon`` (root finding).

    ε decreases in z, so the root is unique; found on log z by Brent's method.

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ).
    q : float
        The sampling probability in (0, 1].
    steps : int
        The rounds composed.
    amplification : {"poisson", "without-replacement"}, default "poisson"
        The subsampling bound.

    Returns
    -------
    float
        z.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    q = _check_q(q)
    steps = check_positive_int("steps", steps, max_value=MAX_COUNT)
    amplification = check_choice("amplification", amplification, AMPLIFICATIONS)
    return _sampled_gaussian_noise_multiplier(float(epsilon), float(delta), float(q), int(steps), amplification)


@functools.lru_cache(maxsize=256)
def _sampled_gaussian_noise_multiplier(epsilon: float, delta: float, q: float, steps: int, amplification: str) -> float:
    """:func:`sampled_gaussian_noise_multiplier` on checked arguments, remembered: a pure function of them (a root
    search of ~100 RDP curves, about a CPU-second), which the configurations of one process often repeat (the
    central Gaussian and the sampled DDG at one ε, the DDG's bit and k sweeps) -- the same float each time."""

    def gap(log_z: float) -> float:
        return sampled_gaussian_epsilon(math.exp(log_z), q, steps, delta, amplification) - epsilon

    return math.exp(decreasing_root(
        gap, -3.0, 3.0, step=2.0, lowest=-30.0, highest=30.0, xtol=1e-10, rtol=1e-10,
        below=lambda _: f"epsilon={epsilon} is met by any noise multiplier down to e^-30",
        above=lambda _: f"no noise multiplier up to e^30 meets epsilon={epsilon}"))
