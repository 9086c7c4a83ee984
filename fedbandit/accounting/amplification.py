"""Privacy amplification by shuffling.

Two families of results are used by the shuffle protocols of :mod:`fedbandit.protocols`:

* **Feldman, McMillan & Talwar (2022), "Hiding among the clones"** (FMT22): n users each
  apply an ε₀-LDP randomizer to their *single* record; a uniformly random shuffle of the n
  outputs is (ε, δ)-DP for much smaller ε.

  - :func:`fmt22_closed_form_epsilon` -- the closed form, as the package reads FMT22's
    closed-form bound (its theorem number and constants are not checked against the paper)
    ε = ln(1 + (1 − e^{−ε₀})/(1 + e^{−ε₀−e'}) · (a + c)), a = 8 sqrt(e^{ε₀} ln(4/δ)/n),
    c = 8 e^{ε₀}/n, e' = ln(1 + a + c); valid only if ε₀ < ln(n / (16 ln(4/δ)))
    (:func:`fmt22_closed_form_validity`).  Checked against first principles where valid:
    its ε is no tighter than the numerical bound and, at its ε, the exact δ(ε) of shuffled
    binary randomized response is ≤ δ
    (tests/test_amplification.py::test_closed_form_is_valid_and_looser_than_numerical).
  - :func:`fmt22_numerical_delta` / :func:`fmt22_numerical_epsilon` -- the tighter
    numerical bound: FMT22 reduce the shuffled output to a post-processing of the pair
    P = (A + Δ, C − A + 1 − Δ), Q = (A + 1 − Δ, C − A + Δ) with C ~ Bin(n − 1, e^{−ε₀}),
    A ~ Bin(C, 1/2), Δ ~ Bern(e^{ε₀}/(e^{ε₀} + 1)) (the package's reading of FMT22's
    reduction); δ(ε) is the hockey-stick divergence of P and Q, computed here exactly, and
    ε the smallest value with δ(ε) ≤ δ.  No validity condition beyond ε₀-LDP.  Checked
    against the exact privacy curve of shuffled binary randomized response, which no valid
    bound may undercut (tests/test_amplification.py::test_numerical_delta_dominates_shuffled_rr,
    ::test_numerical_bound_is_an_upper_bound_and_tighter), and at n = 1, where it must be
    the randomizer itself (::test_n_equals_one_is_the_randomizer_itself).
  - :func:`fmt22_approx_dp` -- (ε₀, δ₀)-LDP randomizers: the shuffled output is
    (ε, δ + (e^ε + 1)(1 + e^{−ε₀}/2) n δ₀)-DP, the package's reading of FMT22's extension
    to approximate-DP randomizers; not derived or checked numerically in the package
    (tests/test_amplification.py::test_approx_dp_extension pins only the arithmetic).

* **Zhou & Chowdhury (2023), Appendix E**: a new amplification lemma for Gaussian
  mechanisms run by M agents on local datasets of size n > 1 (FMT22 applies only to
  n = 1).  Section 6.2 gives the per-agent noise in words, "roughly 1/M of the noise under
  LDP", the lemma itself being in Appendix E; :func:`zc_amplification_sigma0` implements
  the package's reading of its rate, with constant 1 (``variant="recalled"``)
  σ₀² = κ log(1/δ) log(κ/(δT)) log(Mκ/δ) / (ε² M), and, by default, as the authors'
  code computes it [authors' code], σ₀ = sqrt(κ log(1/δ) log(1 + κ/(Tδ)) log(Mκ/δ))
  / (ε sqrt M).  Its validity region (:func:`zc_amplification_validity`): small ε and M
  large relative to log(1/δ), made concrete by the book as ε ≤ 1 and M ≥ 16 ln(4/δ) (the
  book's choice: the FMT22 clone argument the lemma extends needs
  ln(n / (16 ln(4/δ))) > 0, i.e. n > 16 ln(4/δ), whatever ε₀; chapter 2's Reconstruction
  box "the amplification lemma's noise and validity region").  Outside the region the
  functions raise :class:`AmplificationValidityError` unless ``force=True``, in which
  case they warn with :class:`AmplificationValidityWarning`.

* **A necessary condition** any shuffle protocol must meet: the server can always add up
  the shuffled messages, so the *sum* -- a Gaussian mechanism with noise sqrt(M)·σ₀ per
  node -- must itself be (ε, δ)-DP.  :func:`gaussian_epsilon_exact` gives that sum's exact
  ε (Balle & Wang 2018), a *lower bound* on the protocol's ε.  A stronger one, inside the
  lemma's validity region too: the server can pick the target silo's message out of the
  multiset when the data set it apart (:mod:`fedbandit.accounting.deshuffle`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats
from scipy.special import log_ndtr, ndtr

from fedbandit._combinatorics import tree_depth
from fedbandit._validation import (
    MAX_COUNT,
    MAX_STEPS,
    check_bool,
    check_choice,
    check_delta,
    check_epsilon,
    check_finite_float,
    check_float_in_range,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_rng,
)

__all__ = [
    "AmplificationValidityError",
    "AmplificationValidityWarning",
    "Condition",
    "fmt22_closed_form_validity",
    "fmt22_closed_form_epsilon",
    "fmt22_numerical_delta",
    "fmt22_numerical_epsilon",
    "fmt22_approx_dp",
    "zc_amplification_validity",
    "zc_amplification_sigma0",
    "gaussian_delta_exact",
    "gaussian_epsilon_exact",
    "zc_lemma_sigma0",
    "shuffled_gaussian_privacy_loss",
    "shuffled_gaussian_epsilon_mc",
    "shuffled_gaussian_epsilon_far",
    "group_privacy_route_epsilon",
]


class AmplificationValidityError(ValueError):
    """An amplification bound was requested outside its validity region."""


class AmplificationValidityWarning(UserWarning):
    """An amplification bound was forced outside its validity region."""


@dataclass(frozen=True)
class Condition:
    """One validity condition: its statement, the values compared, and whether it holds.

    Attributes
    ----------
    statement : str
        The condition, as the source states it.
    holds : bool
        Whether it holds at the given values.
    detail : str
        The values compared.
    """

    statement: str
    holds: bool
    detail: str

    def __str__(self) -> str:
        return f"{'OK ' if self.holds else 'FAILS'} {self.statement} ({self.detail})"


def _enforce(conditions: list[Condition], what: str, force: bool) -> None:
    failed = [c for c in conditions if not c.holds]
    if not failed:
        return
    msg = f"{what} is outside its validity region: " + "; ".join(f"{c.statement} fails ({c.detail})" for c in failed)
    if not force:
        raise AmplificationValidityError(msg + ". Pass force=True to use it anyway (a warning is emitted).")
    warnings.warn(msg + " (forced).", AmplificationValidityWarning, stacklevel=3)


# ---------------------------------------------------------------------------------
# Feldman, McMillan & Talwar (2022)
# ---------------------------------------------------------------------------------


def fmt22_closed_form_validity(epsilon0: float, n: int, delta: float) -> list[Condition]:
    """FMT22 closed-form validity: ε₀ < ln(n / (16 ln(4/δ))) (the package's reading of FMT22's condition).

    Parameters
    ----------
    epsilon0 : float
        ε₀ of each local report.
    n : int
        The number of shuffled reports.
    delta : float
        The target δ.

    Returns
    -------
    list of Condition
    """
    epsilon0 = check_nonnegative_float("epsilon0", epsilon0)
    n = check_positive_int("n", n)
    delta = check_delta("delta", delta)
    ratio = n / (16.0 * math.log(4.0 / delta))
    bound = math.log(ratio)
    return [
        Condition(
            "ε₀ < ln(n / (16 ln(4/δ)))",
            epsilon0 < bound,
            f"epsilon0={epsilon0:.4g}, ln(n/(16 ln(4/δ)))={bound:.4g} at n={n}, delta={delta:.3g}",
        )
    ]


def fmt22_closed_form_epsilon(epsilon0: float, n: int, delta: float, *, force: bool = False) -> float:
    """FMT22 closed-form amplification bound, as the package reads it (module notes; checked numerically there).

    ε = ln(1 + (1 − e^{−ε₀})/(1 + e^{−ε₀−e'}) · (a + c)) with a = 8 sqrt(e^{ε₀} ln(4/δ)/n),
    c = 8 e^{ε₀}/n and e' = ln(1 + a + c).

    Parameters
    ----------
    epsilon0 : float
        ε₀ of each local report.
    n : int
        The number of shuffled reports.
    delta : float
        The target δ.
    force : bool, default False
        Compute outside the validity region (with a warning).

    Returns
    -------
    float
        ε (inf when e^{ε₀} overflows).

    Raises
    ------
    AmplificationValidityError
        If ε₀ ≥ ln(n / (16 ln(4/δ))) and ``force`` is False.
    """
    force = check_bool("force", force)
    conds = fmt22_closed_form_validity(epsilon0, n, delta)
    _enforce(conds, "The FMT22 closed-form bound", force)
    if epsilon0 > 700.0:  # forced far outside the region: e^{ε₀} overflows, the bound is vacuous
        return math.inf
    a = 8.0 * math.sqrt(math.exp(epsilon0) * math.log(4.0 / delta) / n)
    c = 8.0 * math.exp(epsilon0) / n
    e_prime = math.log1p(a + c)
    return math.log1p((-math.expm1(-epsilon0)) / (1.0 + math.exp(-epsilon0 - e_prime)) * (a + c))


def _binom_half_pmf(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Bin(c, 1/2) pmf at a (0 outside 0..c), broadcasting."""
    c = np.asarray(c, dtype=float)
    a = np.asarray(a, dtype=float)
    ok = (a >= 0) & (a <= c)
    aa = np.where(ok, a, 0.0)
    logp = special.gammaln(c + 1) - special.gammaln(aa + 1) - special.gammaln(c - aa + 1) - c * math.log(2.0)
    return np.where(ok, np.exp(logp), 0.0)


def fmt22_numerical_delta(epsilon: float, epsilon0: float, n: int, *, tail: float = 1e-14) -> float:
    """δ(ε) of n shuffled ε₀-LDP reports, by the FMT22 reduction (exact hockey-stick divergence).

    δ(ε) = Σ_c Pr[C = c] Σ_a max(0, P(a | c) − e^ε Q(a | c)) with C ~ Bin(n − 1, e^{−ε₀}),
    P(a | c) = p B_c(a − 1) + (1 − p) B_c(a), Q(a | c) = (1 − p) B_c(a − 1) + p B_c(a),
    p = e^{ε₀}/(e^{ε₀} + 1) and B_c the Bin(c, 1/2) pmf.  (By the symmetry a ↔ c + 1 − a
    the two directions of the divergence coincide.)  Values of c whose total probability
    is below ``tail`` are skipped and that mass is added to δ, so the result stays an
    upper bound.  ``n`` is at most :data:`fedbandit._validation.MAX_STEPS` (the exact sum
    costs time proportional to n).

    Parameters
    ----------
    epsilon : float
        ε ≥ 0.
    epsilon0 : float
        ε₀ of each local report.
    n : int
        The number of shuffled reports.
    tail : float, default 1e-14
        The binomial mass that may be skipped (added to δ).

    Returns
    -------
    float
        δ(ε).
    """
    epsilon = check_nonnegative_float("epsilon", epsilon)
    epsilon0 = check_nonnegative_float("epsilon0", epsilon0)
    n = check_positive_int("n", n, max_value=MAX_STEPS, reason="the exact sum costs time proportional to n")
    tail = check_float_in_range("tail", tail, 0.0, 1.0, high_inclusive=False)
    # δ(ε) is non-increasing in ε, so δ(700) bounds δ(ε) for larger ε (e^ε overflows a float)
    epsilon = min(epsilon, 700.0)
    if n == 1:
        # No one to hide among: δ(ε) of the ε₀-LDP randomizer itself (two-point worst case).
        p = 1.0 / (1.0 + math.exp(-epsilon0))
        return max(0.0, p - math.exp(epsilon) * (1.0 - p))
    q = math.exp(-epsilon0)
    dist = stats.binom(n - 1, q)
    lo = int(dist.ppf(tail / 2)) if tail > 0 else 0
    hi = int(dist.isf(tail / 2)) if tail > 0 else n - 1
    lo, hi = max(0, lo), min(n - 1, hi)
    cs = np.arange(lo, hi + 1)
    weights = dist.pmf(cs)
    skipped = max(0.0, 1.0 - float(weights.sum()))
    p = 1.0 / (1.0 + q)  # e^{ε₀}/(e^{ε₀} + 1)
    e = math.exp(epsilon)
    # Only a window of a around c/2 matters: Bin(c, 1/2) has standard deviation sqrt(c)/2,
    # and 20 of them leave a tail far below any δ of interest.  The P-mass outside the
    # window is added to δ, so truncation can only make the bound larger.
    width = int(math.ceil(10.0 * math.sqrt(hi + 1))) + 3
    offsets = np.arange(-width, width + 2, dtype=float)[None, :]
    total = 0.0
    chunk = max(1, 2_000_000 // offsets.size)
    for s in range(0, cs.size, chunk):
        c = cs[s : s + chunk, None].astype(float)
        a = np.floor(c / 2.0) + offsets
        b_am1 = _binom_half_pmf(c, a - 1)
        b_a = _binom_half_pmf(c, a)
        P = p * b_am1 + (1 - p) * b_a
        Q = (1 - p) * b_am1 + p * b_a
        inside = np.maximum(0.0, P - e * Q).sum(axis=1) + np.maximum(0.0, 1.0 - P.sum(axis=1))
        total += float(np.sum(weights[s : s + chunk] * inside))
    return min(1.0, total + skipped)


def fmt22_numerical_epsilon(epsilon0: float, n: int, delta: float, *, tol: float = 1e-7) -> float:
    """Smallest ε with :func:`fmt22_numerical_delta` (ε, ε₀, n) ≤ δ, by bisection on [0, ε₀].

    Always valid for ε₀-LDP randomizers on single records; never larger than ε₀.  ``tol``
    (relative, in [1e-12, 1)) is the bisection's stopping width.

    Parameters
    ----------
    epsilon0 : float
        ε₀ of each local report.
    n : int
        The number of shuffled reports.
    delta : float
        The target δ.
    tol : float, default 1e-7
        The bisection's tolerance on ε.

    Returns
    -------
    float
        ε.
    """
    epsilon0 = check_nonnegative_float("epsilon0", epsilon0)
    n = check_positive_int("n", n, max_value=MAX_STEPS, reason="the exact sum costs time proportional to n")
    delta = check_delta("delta", delta)
    tol = check_float_in_range("tol", tol, 1e-12, 1.0, high_inclusive=False)
    if epsilon0 == 0.0 or fmt22_numerical_delta(0.0, epsilon0, n) <= delta:
        return 0.0
    lo, hi = 0.0, epsilon0
    while hi - lo > tol * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if fmt22_numerical_delta(mid, epsilon0, n) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def fmt22_approx_dp(
    epsilon0: float, delta0: float, n: int, delta: float, *, method: str = "numerical", force: bool = False
) -> tuple[float, float]:
    """Shuffling n (ε₀, δ₀)-LDP reports: (ε, δ + (e^ε + 1)(1 + e^{−ε₀}/2) n δ₀) (package's reading of FMT22).

    ``method`` chooses the ε(ε₀, n, δ) of the pure part: ``"numerical"`` or
    ``"closed_form"`` (which has a validity condition, see
    :func:`fmt22_closed_form_epsilon`).

    Parameters
    ----------
    epsilon0 : float
        ε₀ of each local report.
    delta0 : float
        δ₀ of each local report.
    n : int
        The number of shuffled reports.
    delta : float
        The δ of the pure part.
    method : {"numerical", "closed_form"}, default "numerical"
        How ε is computed.
    force : bool, default False
        Use the closed form outside its validity region.

    Returns
    -------
    (float, float)
        (ε, δ) of the shuffled reports.
    """
    delta0 = check_probability("delta0", delta0, open_interval=False)
    check_choice("method", method, ("numerical", "closed_form"))
    force = check_bool("force", force)
    if method == "numerical":
        eps = fmt22_numerical_epsilon(epsilon0, n, delta)
    else:
        eps = fmt22_closed_form_epsilon(epsilon0, n, delta, force=force)
    if delta0 == 0.0:
        return eps, delta
    return eps, delta + (math.exp(min(eps, 700.0)) + 1.0) * (1.0 + math.exp(-epsilon0) / 2.0) * n * delta0


# ---------------------------------------------------------------------------------
# Zhou & Chowdhury (2023), Appendix E: Gaussian mechanisms on local datasets of size n > 1
# ---------------------------------------------------------------------------------

ZC_VARIANTS = ("authors", "recalled", "ideal")


def zc_amplification_validity(
    epsilon: float, delta: float, n_agents: int, n_batches: int, horizon: int, variant: str = "authors"
) -> list[Condition]:
    """Validity conditions of the Zhou–Chowdhury Gaussian amplification lemma.

    * ε ≤ 1 -- "small ε", the book's threshold;
    * M ≥ 16 ln(4/δ) -- "M large relative to log(1/δ)", with the constant of FMT22's clone
      argument, which the lemma extends (the book's choice; chapter 2's Reconstruction box
      "the amplification lemma's noise and validity region");
    * for ``variant="recalled"`` only: κ/(δT) > 1, so that log(κ/(δT)) > 0.

    ``variant="ideal"`` (σ₀ = σ₀(LDP)/sqrt(M), no logarithmic factors) has the same region.

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ).
    n_agents : int
        M, the number of agents.
    n_batches : int
        K, the number of batches (sets κ).
    horizon : int
        T, the horizon.
    variant : {"authors", "recalled", "ideal"}, default "authors"
        The formula (above).

    Returns
    -------
    list of Condition
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    n_agents = check_positive_int("n_agents", n_agents)
    n_batches = check_positive_int("n_batches", n_batches)
    horizon = check_positive_int("horizon", horizon)
    check_choice("variant", variant, ZC_VARIANTS)
    need = 16.0 * math.log(4.0 / delta)
    conds = [
        Condition("ε ≤ 1 (small ε)", epsilon <= 1.0, f"epsilon={epsilon:.3g}"),
        Condition("M ≥ 16 ln(4/δ)", n_agents >= need, f"M = n_agents={n_agents}, 16 ln(4/δ)={need:.1f} at delta={delta:.3g}"),
    ]
    if variant == "recalled":
        kappa = tree_depth(n_batches)
        r = kappa / (delta * horizon)
        conds.append(Condition("κ/(δT) > 1", r > 1.0, f"κ/(δT)={r:.3g} at n_batches={n_batches}, horizon={horizon}, delta={delta:.3g}"))
    return conds


def zc_amplification_sigma0(
    epsilon: float,
    delta: float,
    n_agents: int,
    n_batches: int,
    horizon: int,
    *,
    variant: str = "authors",
    sensitivity: float = 1.0,
    force: bool = False,
) -> float:
    """Per-agent, per-node noise σ₀ of SDP by amplification (Zhou & Chowdhury, Thm. 6.3).

    ``variant="authors"`` [authors' code]:
    σ₀ = L sqrt(κ log(1/δ) log(1 + κ/(Tδ)) log(Mκ/δ)) / (ε sqrt M);
    ``variant="recalled"`` (the package's reading of the paper's rate, constant 1):
    σ₀² = κ log(1/δ) log(κ/(δT)) log(Mκ/δ) / (ε² M);
    ``variant="ideal"`` [paper, "roughly 1/M of the LDP noise"]: σ₀² = σ₀²(LDP)/M with the
    silo-LDP calibration 8κ(log(2/δ) + ε)/ε² -- the shape of the theorem without its
    logarithmic factors, so that the server's total noise equals the central tree's.
    κ = ⌊log₂ K⌋ + 1 with K the number of batches, T the horizon, L = ``sensitivity``.

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ).
    n_agents : int
        M, the number of agents.
    n_batches : int
        K, the number of batches (sets κ).
    horizon : int
        T, the horizon.
    variant : {"authors", "recalled", "ideal"}, default "authors"
        The formula (above).
    sensitivity : float, default 1.0
        L, the records' sensitivity.
    force : bool, default False
        Compute outside the validity region (with a warning).

    Returns
    -------
    float
        σ₀.

    Raises
    ------
    AmplificationValidityError
        Outside :func:`zc_amplification_validity` unless ``force`` (then a warning).
    """
    conds = zc_amplification_validity(epsilon, delta, n_agents, n_batches, horizon, variant)
    sensitivity = check_nonnegative_float("sensitivity", sensitivity)
    force = check_bool("force", force)
    _enforce(conds, f"The Zhou–Chowdhury amplification lemma (variant {variant!r})", force)
    kappa = tree_depth(n_batches)
    if variant == "ideal":
        return sensitivity * math.sqrt(8.0 * kappa * (math.log(2.0 / delta) + epsilon) / n_agents) / epsilon
    log_m = math.log(n_agents * kappa / delta)
    if variant == "authors":
        mid = math.log1p(kappa / (horizon * delta))
    else:
        mid = math.log(kappa / (delta * horizon))
        if mid <= 0:
            # Forced outside validity: the rate formula has no meaning; fall back to 0 noise
            # would be unsafe, so keep the authors' positive version and say so.
            warnings.warn(
                "log(κ/(δT)) <= 0: using log(1 + κ/(δT)) as in the authors' code", AmplificationValidityWarning, stacklevel=2
            )
            mid = math.log1p(kappa / (horizon * delta))
    return sensitivity * math.sqrt(kappa * math.log(1.0 / delta) * mid * log_m) / (epsilon * math.sqrt(n_agents))


# ---------------------------------------------------------------------------------
# Exact privacy profile of the Gaussian mechanism (a necessary condition for shuffling)
# ---------------------------------------------------------------------------------


def gaussian_delta_exact(epsilon: float, mu: float) -> float:
    """δ(ε) of the Gaussian mechanism with sensitivity-to-noise ratio μ = Δ/σ (exact).

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Balle & Wang 2018, Thm. 8); tight for the
    worst pair of neighbouring inputs.  k Gaussian releases with ratios μ_i compose exactly
    to one with μ = sqrt(Σ μ_i²).

    Parameters
    ----------
    epsilon : float
        ε ≥ 0.
    mu : float
        μ = Δ/σ ≥ 0.

    Returns
    -------
    float
        δ(ε).
    """
    epsilon = check_nonnegative_float("epsilon", epsilon)
    mu = check_nonnegative_float("mu", mu)
    if mu == 0.0:
        return 0.0
    a = -epsilon / mu + mu / 2.0
    b = -epsilon / mu - mu / 2.0
    return max(0.0, float(ndtr(a) - math.exp(epsilon + log_ndtr(b))))


def gaussian_epsilon_exact(mu: float, delta: float) -> float:
    """Smallest ε with :func:`gaussian_delta_exact` (ε, μ) ≤ δ (exact, by root finding).

    Parameters
    ----------
    mu : float
        μ = Δ/σ ≥ 0.
    delta : float
        The target δ.

    Returns
    -------
    float
        ε.
    """
    mu = check_nonnegative_float("mu", mu)
    delta = check_delta("delta", delta)
    if mu > 1e6:
        # ε ~ μ²/2 beyond 5e11 (no privacy at all): in δ(ε) = Φ(a) − e^{ε + log Φ(b)} the
        # exponent is a difference of two numbers ~ μ²ε, whose rounding overflows e^x
        raise ValueError(f"mu must lie in [0, 1e6] (larger mu means epsilon > 5e11), got {mu!r}")
    if gaussian_delta_exact(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while gaussian_delta_exact(hi, mu) > delta:
        hi *= 2.0
        if hi > 1e300:
            raise ValueError(f"mu={mu!r} is too large: no finite epsilon has delta(epsilon) <= {delta!r}")
    return float(optimize.brentq(lambda e: gaussian_delta_exact(e, mu) - delta, 0.0, hi, xtol=1e-14, rtol=1e-12))



# ---------------------------------------------------------------------------------
# Checking the Zhou–Chowdhury lemma: shuffled Gaussian sums of local datasets of size n
# ---------------------------------------------------------------------------------


def zc_lemma_sigma0(epsilon: float, delta: float, n_agents: int, n_records: int, *, variant: str = "authors",
                    sensitivity: float = 1.0) -> float:
    """σ₀ of the Zhou–Chowdhury lemma for one release per agent, as the book reconstructs it.

    The lemma is in their Appendix E; the book writes it out from the paper's prose (chapter 2's
    Reconstruction box "the amplification lemma for local datasets of size n > 1"): M agents,
    each releasing the sum of its n records (each of sensitivity Δ = ``sensitivity``) plus
    N(0, σ₀²), shuffled, are (ε, δ)-DP for one record changed, with σ₀ the one-node (κ = 1)
    instance of the noise of Section 6.2's SDP-by-amplification result, the horizon T read as
    the local dataset size n.  Chapter 2 ("Checking the lemma") compares both variants with
    the Monte Carlo privacy curve of :func:`shuffled_gaussian_epsilon_mc`: ``variant="authors"`` [authors' code]
    σ₀ = Δ sqrt(log(1/δ) log(1 + 1/(nδ)) log(M/δ))/(ε sqrt M); ``"ideal"`` σ₀ =
    Δ sqrt(8(log(2/δ) + ε))/(ε sqrt M), the silo-LDP calibration divided by sqrt(M) ("roughly
    1/M of the LDP noise").  No validity region is applied (the check is of the formula).

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ).
    n_agents : int
        M.
    n_records : int
        n, the records per agent.
    variant : {"authors", "ideal"}, default "authors"
        The formula (above).
    sensitivity : float, default 1.0
        Δ, one record's sensitivity.

    Returns
    -------
    float
        σ₀.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    M = check_positive_int("n_agents", n_agents)
    n = check_positive_int("n_records", n_records)
    check_choice("variant", variant, ("authors", "ideal"))
    sensitivity = check_nonnegative_float("sensitivity", sensitivity)
    if variant == "ideal":
        return sensitivity * math.sqrt(8.0 * (math.log(2.0 / delta) + epsilon) / M) / epsilon
    return sensitivity * math.sqrt(math.log(1.0 / delta) * math.log1p(1.0 / (n * delta)) * math.log(M / delta)) / (
        epsilon * math.sqrt(M)
    )


#: Largest n_samples × n_agents of the Monte Carlo privacy loss (a few float arrays of that size).
_MC_CELLS = 50_000_000


def _mu(sensitivity: float, sigma0: float) -> float:
    """Δ/σ₀ for the exact Gaussian profile, refused by name when it is out of its range."""
    sigma0 = check_positive_float("sigma0", sigma0)
    mu = check_nonnegative_float("sensitivity", sensitivity) / sigma0
    if mu > 1e6:
        raise ValueError(f"sensitivity/sigma0 must be at most 1e6 (epsilon beyond 5e11), got sensitivity={sensitivity!r}, "
                         f"sigma0={sigma0!r}")
    return mu


def shuffled_gaussian_privacy_loss(sigma0: float, n_agents: int, others: float, *, sensitivity: float = 1.0,
                                   n_samples: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Samples of the privacy loss of M shuffled Gaussian sums, one agent's record changed.

    One-dimensional model: agent 1's sum is 0 (input D) or Δ (input D′, one record changed),
    the other M − 1 agents' sums are all ``others``; each agent releases its sum plus
    N(0, σ₀²) and the shuffler outputs the multiset.  The likelihood of a multiset y is a
    sum over which element is agent 1's, so the privacy loss is
    ℓ(y) = log Σ_j e^{a(y_j)} − log Σ_j e^{a′(y_j)} with a(y) = ((y − c)² − y²)/(2σ₀²) and
    a′(y) = ((y − c)² − (y − Δ)²)/(2σ₀²).  Returns (ℓ under D, ℓ under D′), ``n_samples`` each.

    Parameters
    ----------
    sigma0 : float
        σ₀, each agent's Gaussian noise.
    n_agents : int
        M.
    others : float
        c, the other agents' common sum.
    sensitivity : float, default 1.0
        Δ, one record's sensitivity.
    n_samples : int
        The number of draws per input.
    rng : numpy.random.Generator

    Returns
    -------
    (ndarray, ndarray)
        The privacy loss sampled under D and under D′.
    """
    sigma0 = check_positive_float("sigma0", sigma0)
    M = check_positive_int("n_agents", n_agents, max_value=_MC_CELLS)
    S = check_positive_int("n_samples", n_samples, max_value=_MC_CELLS)
    if S * M > _MC_CELLS:
        raise ValueError(f"n_samples * n_agents = {S * M} exceeds {_MC_CELLS:.0e} (arrays of n_samples x n_agents "
                         f"floats are drawn), got n_samples={S}, n_agents={M}")
    c = check_finite_float("others", others)
    D = check_nonnegative_float("sensitivity", sensitivity)
    rng = check_rng("rng", rng)
    out = []
    for s1 in (0.0, D):
        y = rng.standard_normal((S, M)) * sigma0
        y[:, 0] += s1
        y[:, 1:] += c
        a = ((y - c) ** 2 - y**2) / (2 * sigma0**2)
        b = ((y - c) ** 2 - (y - D) ** 2) / (2 * sigma0**2)
        out.append(special.logsumexp(a, axis=1) - special.logsumexp(b, axis=1))
    return out[0], out[1]


def _epsilon_from_losses(loss_p: np.ndarray, loss_q: np.ndarray, delta: float) -> float:
    """Smallest ε on a fine grid with both hockey-stick estimates ≤ δ (Monte Carlo)."""
    def d_of(e: float) -> float:
        return float(max(np.mean(-np.expm1(np.minimum(e - loss_p, 0.0))), np.mean(-np.expm1(np.minimum(e + loss_q, 0.0)))))

    if d_of(0.0) <= delta:
        return 0.0
    hi = max(float(np.max(loss_p)), float(np.max(-loss_q)), 1e-6)
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if d_of(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def shuffled_gaussian_epsilon_mc(sigma0: float, n_agents: int, others: float, delta: float, *,
                                 sensitivity: float = 1.0, n_samples: int = 100_000,
                                 rng: np.random.Generator) -> float:
    """ε(δ) of the shuffled Gaussian sums of :func:`shuffled_gaussian_privacy_loss`, by Monte Carlo.

    δ(ε) = E_D[(1 − e^{ε − ℓ})₊] (and the other direction) is estimated by the sample mean
    over ``n_samples`` draws; the smallest ε meeting ``delta`` is found by bisection.  An
    estimate of the exact privacy curve of that pair of inputs -- hence, up to its Monte
    Carlo error, a lower bound on the protocol's ε over all inputs.

    Parameters
    ----------
    sigma0 : float
        σ₀, each agent's Gaussian noise.
    n_agents : int
        M.
    others : float
        c, the other agents' common sum.
    delta : float
        The target δ.
    sensitivity : float, default 1.0
        Δ, one record's sensitivity.
    n_samples : int, default 100000
        The number of draws per input.
    rng : numpy.random.Generator

    Returns
    -------
    float
        The estimated ε.
    """
    delta = check_delta("delta", delta)
    lp, lq = shuffled_gaussian_privacy_loss(sigma0, n_agents, others, sensitivity=sensitivity, n_samples=n_samples,
                                            rng=rng)
    return _epsilon_from_losses(lp, lq, delta)


def shuffled_gaussian_epsilon_far(sigma0: float, delta: float, *, sensitivity: float = 1.0) -> float:
    """The exact worst-case ε of shuffled Gaussian sums when the other agents' sums can be far away.

    If the other agents' data put their sums at distance ≥ D from agent 1's, the element
    nearest agent 1's sum is agent 1's except with probability ≤ (M − 1)·2Φ(−(D − Δ)/(2σ₀)),
    so the shuffled view is as informative as agent 1's release alone up to that probability,
    and no view is more informative than it (the shuffle is post-processing).  As D/σ₀ → ∞
    the worst-case ε(δ) is therefore exactly the Gaussian mechanism's,
    :func:`gaussian_epsilon_exact` (Δ/σ₀, δ): shuffling amplifies nothing.  Sums of n records
    of range r reach D = (n − 1)·r, so this is the exact curve as soon as nr ≫ σ₀.

    Parameters
    ----------
    sigma0 : float
        σ₀, each agent's Gaussian noise.
    delta : float
        The target δ.
    sensitivity : float, default 1.0
        Δ, one record's sensitivity.

    Returns
    -------
    float
        ε.
    """
    delta = check_delta("delta", delta)
    return gaussian_epsilon_exact(_mu(sensitivity, sigma0), delta)


def group_privacy_route_epsilon(sigma0: float, n_records: int, n_agents: int, delta: float, *,
                                sensitivity: float = 1.0) -> tuple[float, float]:
    """The group-privacy route of Lowy & Razaviyayn (2021) for shuffled Gaussian sums of n records.

    Each agent's Gaussian sum is (ε_r, δ_r)-DP per record (exact Gaussian profile); by group
    privacy it is (nε_r, n e^{(n−1)ε_r} δ_r)-DP for any change of its whole dataset, i.e. an
    (ε₀, δ₀) local randomizer; FMT22's amplification (:func:`fmt22_approx_dp`, numerical)
    then gives (ε, δ_amp + (e^ε + 1)(1 + e^{−ε₀}/2) M δ₀).  Half of ``delta`` goes to δ_amp,
    half to the δ₀ term; ε_r is the smallest whose group δ₀ fits.  Returns (ε, ε₀); ε = ε₀
    (or ∞) when amplification does not help.  A valid upper bound, loose by design.

    Parameters
    ----------
    sigma0 : float
        σ₀, each agent's Gaussian noise.
    n_records : int
        n, the records per agent.
    n_agents : int
        M.
    delta : float
        The target δ.
    sensitivity : float, default 1.0
        Δ, one record's sensitivity.

    Returns
    -------
    (float, float)
        (ε, ε₀).
    """
    delta = check_delta("delta", delta)
    n = check_positive_int("n_records", n_records, max_value=MAX_COUNT)
    M = check_positive_int("n_agents", n_agents, max_value=MAX_STEPS,
                           reason="the numerical amplification bound costs time proportional to n_agents")
    mu = _mu(sensitivity, sigma0)
    best = (math.inf, math.inf)
    for eps_r in np.geomspace(1e-4, 5.0, 60):
        d_r = gaussian_delta_exact(float(eps_r), mu)
        eps0 = n * float(eps_r)
        if eps0 > 50:
            break
        delta0 = n * math.exp((n - 1) * eps_r) * d_r
        if delta / 2 + 2.0 * M * delta0 > delta:  # the δ₀ term alone is too large (its factor is ≥ 2)
            continue
        eps = fmt22_numerical_epsilon(eps0, M, delta / 2) if M > 1 else eps0
        total = delta / 2 + (math.exp(eps) + 1.0) * (1.0 + math.exp(-eps0) / 2.0) * M * delta0
        if total <= delta and eps < best[0]:
            best = (eps, eps0)
    return best
