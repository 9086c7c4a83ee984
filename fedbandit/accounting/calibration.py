"""Every noise calibration rule of the book: from a target (ε, δ) to a mechanism's noise.

No other module computes a noise scale from privacy parameters: mechanisms and protocols
take their σ, p, b or Laplace scale from the functions here (or from the DDG parameter
search of :mod:`fedbandit.accounting.ddg` and the shuffle flip probabilities of
:mod:`fedbandit.accounting.shuffle`).

* :func:`ldp_sigma0`, :func:`central_sigma`, :func:`gaussian_tree_sigma0` -- Gaussian tree
  node noise (Zhou & Chowdhury 2023, Thm. 6.1 and 6.3; DP20's :func:`dp20_sigma`);
* :func:`vector_sum_parameters` -- the shuffle vector sum of Cheu, Joseph, Mao & Peng (2021);
  :func:`authors_vector_sum_noise` and :func:`authors_vector_sum_lambda_sigma` -- the noise and
  the λ of Zhou & Chowdhury's experiment code for it;
* :func:`laplace_counter_scale` -- continual counting (Chan, Shi & Song 2011).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._combinatorics import tree_depth
from fedbandit._validation import (
    MAX_COUNT,
    check_bool,
    check_choice,
    check_delta,
    check_epsilon,
    check_float_in_range,
    check_positive_array,
    check_positive_float,
    check_positive_int,
    check_probability,
)
from fedbandit.accounting.amplification import zc_amplification_sigma0
from fedbandit.accounting.zcdp import approx_dp_to_zcdp

__all__ = [
    "ldp_sigma0",
    "ldp_total_variance",
    "central_sigma",
    "CALIBRATIONS",
    "dp20_m",
    "dp20_sigma",
    "TREE_SIGMA_RULES",
    "gaussian_tree_sigma0",
    "vector_sum_parameters",
    "authors_vector_sum_noise",
    "authors_vector_sum_lambda_sigma",
    "authors_vector_sum_constant",
    "laplace_counter_scale",
    "CJMP21_CONSTANT",
]


#: Calibrations of the Gaussian tree's node noise (see :func:`ldp_sigma0`).
CALIBRATIONS = ("paper", "authors", "zcdp")


def ldp_sigma0(epsilon: float, delta: float, n_batches_: int, *, calibration: str = "paper",
               sensitivity: float = 1.0) -> float:
    """Per-agent, per-node noise σ₀ of silo-level LDP (Zhou & Chowdhury, Thm. 6.1).

    ``"paper"`` [paper]: σ₀² = 8κ(log(2/δ) + ε)/ε² (so that the server's total noise is
    σ² = 8Mκ²(log(2/δ) + ε)/ε²); ``"authors"`` [authors' code]:
    σ₀ = L sqrt(κ(log(1/δ) + ε))/ε (no factor 8, log(1/δ)); ``"zcdp"`` [derived, the book's
    tight calibration]: the smallest σ₀ whose κ node releases of the two statistics are
    ρ-zCDP with ρ = :func:`fedbandit.accounting.zcdp.approx_dp_to_zcdp` (ε, δ), i.e.
    σ₀ = sqrt(κ/ρ) (each statistic's sensitivity counted once, [BS16] Prop. 1.6, Lemma 2.3;
    converted with [CKS20]).  Multiplied by ``sensitivity``.

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ).
    n_batches_ : int
        K, the number of batches (sets κ).
    calibration : {"paper", "authors", "zcdp"}, default "paper"
        The rule (above).
    sensitivity : float, default 1.0
        The multiplier L.

    Returns
    -------
    float
        σ₀.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    check_choice("calibration", calibration, CALIBRATIONS)
    sensitivity = check_positive_float("sensitivity", sensitivity)
    k = tree_depth(check_positive_int("n_batches", n_batches_))
    if calibration == "zcdp":
        return sensitivity * math.sqrt(k / approx_dp_to_zcdp(epsilon, delta))
    if calibration == "paper":
        return sensitivity * math.sqrt(8.0 * k * (math.log(2.0 / delta) + epsilon)) / epsilon
    return sensitivity * math.sqrt(k * (math.log(1.0 / delta) + epsilon)) / epsilon


def ldp_total_variance(epsilon: float, delta: float, n_batches_: int, n_agents: int, *,
                       calibration: str = "paper") -> float:
    """σ² = M κ σ₀²: total per-entry noise variance at the server (bound over k) [paper].

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ).
    n_batches_ : int
        K, the number of batches (sets κ).
    n_agents : int
        M.
    calibration : {"paper", "authors", "zcdp"}, default "paper"
        The rule (above).

    Returns
    -------
    float
        σ².
    """
    n_agents = check_positive_int("n_agents", n_agents)
    n_batches_ = check_positive_int("n_batches", n_batches_)
    s0 = ldp_sigma0(epsilon, delta, n_batches_, calibration=calibration)
    return n_agents * tree_depth(n_batches_) * s0**2


def central_sigma(epsilon: float, delta: float, n_batches_: int, *, calibration: str = "paper") -> float:
    """Per-node noise of the central tree at a trusted server (super agent).

    The same tree calibration as :func:`ldp_sigma0`, added once at the server instead of
    by every agent [derived: Shariff & Sheffet 2018 style tree with zCDP accounting].

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ).
    n_batches_ : int
        K, the number of batches (sets κ).
    calibration : {"paper", "authors", "zcdp"}, default "paper"
        The rule (above).

    Returns
    -------
    float
        The server's per-node σ.
    """
    return ldp_sigma0(epsilon, delta, n_batches_, calibration=calibration)


def dp20_m(horizon: int) -> int:
    """m = 1 + ⌈log₂ T⌉: the levels of a binary tree over T synchronizations, the m of DP20's calibration.

    One user enters at most m of its silo's tree nodes; DP20's σ (:func:`dp20_sigma`) is
    derived from it in chapter 1 (section "Where the calibration, the shift and the radius
    come from").

    Parameters
    ----------
    horizon : int
        T.

    Returns
    -------
    int
        m.
    """
    horizon = check_positive_int("horizon", horizon)
    return 1 + math.ceil(math.log2(horizon)) if horizon > 1 else 1


def dp20_sigma(epsilon: float, delta: float, horizon: int, feature_bound: float = 1.0) -> float:
    """DP20's per-silo, per-node noise standard deviation σ (the book's reading of Dubey & Pentland 2020).

    σ² = 16 m L² log²(1/δ) / ε² with m = :func:`dp20_m` (T) (Shariff–Sheffet style tree
    over at most T synchronizations).  Chapter 1 (section "Where the calibration, the shift
    and the radius come from") derives this form from the Gaussian mechanism and advanced
    composition over the m nodes and checks the exact ε of this σ on Balle & Wang's privacy
    curve.  DP20's regret analysis
    treats σ² as the *total* noise variance at the server; every silo adding it makes the
    total Mσ² (Zhou & Chowdhury 2023, Section 4).

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ).
    horizon : int
        T.
    feature_bound : float, default 1.0
        L.

    Returns
    -------
    float
        σ.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    L = check_positive_float("feature_bound", feature_bound)
    m = dp20_m(horizon)
    return math.sqrt(16.0 * m) * L * math.log(1.0 / delta) / epsilon


#: The constant of the vector-sum protocol's b, b = ⌈24·10⁴ g² log²(4d²/δ)/(ε² n)⌉: the package's reading of the
#: parameter choice in Cheu, Joseph, Mao & Peng (2021)'s theorem (theorem number and constant not checked against
#: the paper; chapter 2's Reconstruction box "the vector-sum protocol inside the tree").
CJMP21_CONSTANT = 24e4


#: Rules for the node noise σ₀ of a Gaussian tree randomizer (:func:`gaussian_tree_sigma0`).
TREE_SIGMA_RULES = (
    "paper",
    "authors",
    "zcdp",
    "amplification-authors",
    "amplification-recalled",
    "amplification-ideal",
    "dp20",
    "dp20-claimed",
)


def gaussian_tree_sigma0(
    rule: str,
    epsilon: float,
    delta: float,
    *,
    n_batches: int,
    horizon: int,
    n_agents: int,
    sensitivity: float = 1.0,
    parties: int = 1,
    feature_bound: float = 1.0,
    force: bool = False,
) -> float:
    """Per-party, per-node noise σ₀ of a Gaussian tree over K = ``n_batches`` batches.

    ``rule``:

    * ``"paper"``, ``"authors"``, ``"zcdp"`` -- the silo-level LDP calibrations of
      :func:`ldp_sigma0` (Zhou & Chowdhury Thm. 6.1 [paper], the authors' code, the book's
      tight zCDP rule), for an adversary who sees one party's releases.  When the
      adversary sees only the sum of ``parties`` parties' releases (secure aggregation),
      each adds σ₀/sqrt(parties), so that the sum carries the same noise;
    * ``"amplification-authors"`` / ``"-recalled"`` / ``"-ideal"`` -- SDP by amplification
      (Zhou & Chowdhury Thm. 6.3; :func:`fedbandit.accounting.amplification.zc_amplification_sigma0`),
      which raises outside the lemma's validity region unless ``force``;
    * ``"dp20"`` -- DP20's per-silo σ (:func:`dp20_sigma`, over ``horizon``
      synchronizations); ``"dp20-claimed"`` -- σ/sqrt(M), the total σ² that DP20's regret
      analysis assumes.

    Parameters
    ----------
    rule : str
        One of :data:`TREE_SIGMA_RULES`.
    epsilon, delta : float
        The target (ε, δ).
    n_batches : int
        K (sets κ).
    horizon : int
        T.
    n_agents : int
        M.
    sensitivity : float, default 1.0
        The records' sensitivity.
    parties : int, default 1
        Parties whose releases the adversary sees summed.
    feature_bound : float, default 1.0
        L (DP20's rules).
    force : bool, default False
        Amplification outside its validity region (with a warning).

    Returns
    -------
    float
        σ₀.
    """
    rule = check_choice("rule", rule, TREE_SIGMA_RULES)
    parties = check_positive_int("parties", parties)
    n_agents = check_positive_int("n_agents", n_agents)
    n_batches = check_positive_int("n_batches", n_batches)
    horizon = check_positive_int("horizon", horizon)
    force = check_bool("force", force)
    if rule in CALIBRATIONS:
        return ldp_sigma0(epsilon, delta, n_batches, calibration=rule, sensitivity=sensitivity) / math.sqrt(parties)
    if rule.startswith("amplification-"):
        return zc_amplification_sigma0(
            epsilon, delta, n_agents, n_batches, horizon, variant=rule.split("-", 1)[1], sensitivity=sensitivity, force=force
        )
    sigma = dp20_sigma(epsilon, delta, horizon, feature_bound)
    return sigma if rule == "dp20" else sigma / math.sqrt(n_agents)


def vector_sum_parameters(epsilon: float, delta: float, n_users: int, dim: int, *, g: int | None = None,
                          constant: float = CJMP21_CONSTANT, p: float = 0.25) -> tuple[int, int, float]:
    """(g, b, p) of the shuffle vector-sum protocol of Cheu, Joseph, Mao & Peng (2021), as the package reads it.

    g = max(⌈2 sqrt n⌉, D, 4) (or a given larger g), b = ⌈c g² log²(4D²/δ)/(ε² n)⌉ with
    c = :data:`CJMP21_CONSTANT` (the theorem's; smaller values are not covered by it),
    p = 1/4; valid for 0 < ε ≤ 15 and 0 < δ < 1/2.  Another blanket probability
    p ∈ (0, 1/2] is accepted for experiments (the theorem covers p = 1/4 only; p = 0 would
    send the users' bits without noise and is refused).  The privacy of the protocol rests on
    CJMP21's theorem as the package reads these parameters from it (chapter 2's Reconstruction
    box "the vector-sum protocol inside the tree"); the package checks the analyzer's output
    (unbiased, with the stated noise) in
    tests/test_protocols.py::test_vector_sum_aggregate_matches_per_user_in_distribution.

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ).
    n_users : int
        n, the users per sum.
    dim : int
        D, the coordinates.
    g : int, optional
        The encoding levels (default the theorem's).
    constant : float, default CJMP21_CONSTANT
        c.
    p : float, default 0.25
        The blanket probability.

    Returns
    -------
    (int, int, float)
        (g, b, p).
    """
    p = check_float_in_range("p", p, 0.0, 0.5, low_inclusive=False)
    epsilon = check_epsilon("epsilon", epsilon)
    if epsilon > 15:
        raise ValueError(f"epsilon must lie in (0, 15] for the vector-sum protocol, got {epsilon!r}")
    delta = check_delta("delta", delta)
    if delta >= 0.5:
        raise ValueError(f"delta must lie in (0, 0.5) for the vector-sum protocol, got {delta!r}")
    n_users = check_positive_int("n_users", n_users)
    dim = check_positive_int("dim", dim)
    constant = check_positive_float("constant", constant)
    g_min = max(math.ceil(2 * math.sqrt(n_users)), dim, 4)
    g = g_min if g is None else check_positive_int("g", g)
    if g < g_min:
        raise ValueError(f"g must be >= max(2 sqrt(n), D, 4) = {g_min}, got {g}")
    b = int(math.ceil(constant * g**2 * math.log(4 * dim**2 / delta) ** 2 / (epsilon**2 * n_users)))
    return g, b, float(p)


def authors_vector_sum_noise(epsilon: float, delta: float, dim: int, *, scale: float = 1.0, feature_bound: float = 1.0,
                             p: float = 0.25) -> float:
    """Per-coordinate, per-node noise standard deviation of the authors' vector sum [authors' code].

    Zhou & Chowdhury's experiment code (``Agents.py``, ``SDPFedLinUCBVecSum.update`` with the
    1-D randomizer ``R1d`` and analyzer ``A1d``) shifts every coordinate to [0, 2L], scales it
    by g/L, adds Bin(b, p) noise bits with b = scale·g²·log²(d²/δ)/(ε²n) (d the *feature*
    dimension, the budget (ε, δ) of every node) and rescales by L/g, so the noise of a node
    sum of n users has standard deviation (L/g)·sqrt(n b p(1 − p)) =
    L·sqrt(scale)·log(d²/δ)·sqrt(p(1 − p))/ε, whatever n and g (14.96 at ε = 0.2, δ = 0.1,
    d = 10, scale = 1).  No theorem covers scale = 1.

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ).
    dim : int
        d, the feature dimension.
    scale : float, default 1.0
        The multiplier of b.
    feature_bound : float, default 1.0
        L.
    p : float, default 0.25
        The blanket probability.

    Returns
    -------
    float
        The node noise's standard deviation.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    dim = check_positive_int("dim", dim)
    scale = check_positive_float("scale", scale)
    L = check_positive_float("feature_bound", feature_bound)
    p = check_probability("p", p)
    return L * math.sqrt(scale) * math.log(dim**2 / delta) * math.sqrt(p * (1.0 - p)) / epsilon


def authors_vector_sum_constant(delta: float, dim: int, n_coordinates: int, *, scale: float = 1.0) -> float:
    """The c of :func:`vector_sum_parameters` whose node noise is the authors' [derived].

    The book's encoding (coordinates in [−1, 1] mapped to [0, 1], g levels) has node noise
    2·sqrt(c)·log(4D²/δ)·sqrt(p(1 − p))/ε (D = ``n_coordinates``, up to b's rounding up);
    equating it with :func:`authors_vector_sum_noise` (L = 1) gives
    c = scale·(log(d²/δ)/(2 log(4D²/δ)))²: 0.082 at δ = 0.1, d = 10, D = 65.

    Parameters
    ----------
    delta : float
        δ.
    dim : int
        d, the feature dimension.
    n_coordinates : int
        D, the coordinates summed.
    scale : float, default 1.0
        The authors' multiplier.

    Returns
    -------
    float
        c.
    """
    delta = check_delta("delta", delta)
    dim = check_positive_int("dim", dim)
    n_coordinates = check_positive_int("n_coordinates", n_coordinates)
    scale = check_positive_float("scale", scale)
    return scale * (math.log(dim**2 / delta) / (2.0 * math.log(4.0 * n_coordinates**2 / delta))) ** 2


def authors_vector_sum_lambda_sigma(epsilon: float, delta: float, n_batches: int, dim: int, *,
                                    feature_bound: float = 1.0) -> float:
    """The σ from which the authors' code sets λ for its vector sum [authors' code].

    ``SDPFedLinUCBVecSum.__init__``: noise = L·sqrt(κ log(1/δ))·log(κ d²/δ)/ε and
    λ = sqrt(κ)·noise·(sqrt(κ + log(1/α)) + sqrt(d)), i.e. the book's
    :func:`fedbandit.theory.linear.regularizer_lambda` with σ = sqrt(κ)·noise (4260 at
    ε = 0.2, δ = 0.1, K = 400, d = 10, α = 0.01).  This σ is not the noise the vector sum
    adds (:func:`authors_vector_sum_noise`): it is a separate formula of the code.

    Parameters
    ----------
    epsilon, delta : float
        The target (ε, δ).
    n_batches : int
        K (sets κ).
    dim : int
        d.
    feature_bound : float, default 1.0
        L.

    Returns
    -------
    float
        σ.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    dim = check_positive_int("dim", dim)
    L = check_positive_float("feature_bound", feature_bound)
    k = tree_depth(check_positive_int("n_batches", n_batches, max_value=MAX_COUNT))
    noise = L * math.sqrt(k * math.log(1.0 / delta)) * math.log(k * dim**2 / delta) / epsilon
    return math.sqrt(k) * noise


def laplace_counter_scale(epsilon: ArrayLike, sensitivity: float = 1.0, *, releases: int = 1) -> float | np.ndarray:
    """Laplace scale b = releases·s/ε so that ``releases`` releases of one item are ε-DP in total.

    The binary mechanism over T steps puts every item in L = bit_length(T) nodes
    (``releases=L``), the logarithmic mechanism in one release, and the hybrid mechanism
    spends ε/2 on each part (Chan, Shi & Song 2011).  ``epsilon`` may be an array (one
    budget per stream); every entry must lie in (0, inf).

    Parameters
    ----------
    epsilon : float or array_like
        ε (one per stream for an array).
    sensitivity : float, default 1.0
        s.
    releases : int, default 1
        The releases each item enters.

    Returns
    -------
    float or ndarray
        b.
    """
    if np.ndim(epsilon) == 0:
        epsilon = check_epsilon("epsilon", epsilon)
    else:
        epsilon = check_positive_array("epsilon", epsilon)
    sensitivity = check_positive_float("sensitivity", sensitivity)
    releases = check_positive_int("releases", releases)
    return releases * sensitivity / epsilon
