"""accounting.calibration."""

from __future__ import annotations

import math

from fedbandit._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_positive_float,
    check_positive_int,
)
from fedbandit.accounting.zcdp import approx_dp_to_zcdp
from fedbandit.mechanisms.tree import tree_depth

__all__ = [
    "ldp_sigma0",
    "ldp_total_variance",
    "central_sigma",
    "CALIBRATIONS",
    "dp20_m",
    "dp20_sigma",
]


#: Calibrations of the Gaussian tree's node noise (see :func:`ldp_sigma0`).
CALIBRATIONS = ("paper", "authors", "zcdp")


def ldp_sigma0(epsilon, delta, n_batches_, *, calibration: str = "paper", sensitivity: float = 1.0) -> float:
    """Per-agent, per-node noise σ₀ of silo-level LDP (Zhou & Chowdhury, Thm. 6.1).

    ``"paper"`` [paper]: σ₀² = 8κ(log(2/δ) + ε)/ε² (so that the server's total noise is
    σ² = 8Mκ²(log(2/δ) + ε)/ε²); ``"authors"`` [authors' code]:
    σ₀ = L sqrt(κ(log(1/δ) + ε))/ε (no factor 8, log(1/δ)); ``"zcdp"`` [derived, the book's
    tight calibration]: the smallest σ₀ whose κ node releases of the two statistics are
    ρ-zCDP with ρ = :func:`fedbandit.accounting.zcdp.approx_dp_to_zcdp` (ε, δ), i.e.
    σ₀ = sqrt(κ/ρ) (each statistic's sensitivity counted once, [BS16] Prop. 1.6, Lemma 2.3;
    converted with [CKS20]).  Multiplied by ``sensitivity``.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    check_choice("calibration", calibration, CALIBRATIONS)
    sensitivity = check_positive_float("sensitivity", sensitivity)
    k = tree_depth(n_batches_)
    if calibration == "zcdp":
        return sensitivity * math.sqrt(k / approx_dp_to_zcdp(epsilon, delta))
    if calibration == "paper":
        return sensitivity * math.sqrt(8.0 * k * (math.log(2.0 / delta) + epsilon)) / epsilon
    return sensitivity * math.sqrt(k * (math.log(1.0 / delta) + epsilon)) / epsilon


def ldp_total_variance(epsilon, delta, n_batches_, n_agents, *, calibration: str = "paper") -> float:
    """σ² = M κ σ₀²: total per-entry noise variance at the server (bound over k) [paper]."""
    n_agents = check_positive_int("n_agents", n_agents)
    s0 = ldp_sigma0(epsilon, delta, n_batches_, calibration=calibration)
    return n_agents * tree_depth(n_batches_) * s0**2


def central_sigma(epsilon, delta, n_batches_, *, calibration: str = "paper") -> float:
    """Per-node noise of the central tree at a trusted server (super agent).

    The same tree calibration as :func:`ldp_sigma0`, added once at the server instead of
    by every agent [derived: Shariff & Sheffet 2018 style tree with zCDP accounting].
    """
    return ldp_sigma0(epsilon, delta, n_batches_, calibration=calibration)


def dp20_m(horizon) -> int:
    """m = 1 + ⌈log₂ T⌉, the tree height in DP20's calibration [recalled]."""
    horizon = check_positive_int("horizon", horizon)
    return 1 + math.ceil(math.log2(horizon)) if horizon > 1 else 1


def dp20_sigma(epsilon, delta, horizon, feature_bound: float = 1.0) -> float:
    """DP20's per-silo, per-node noise standard deviation σ [recalled].

    σ² = 16 m L² log²(1/δ) / ε² with m = :func:`dp20_m` (T) (Shariff–Sheffet style tree
    over at most T synchronizations; paper-facts section 1).  DP20's regret analysis
    treats σ² as the *total* noise variance at the server; every silo adding it makes the
    total Mσ² (Zhou & Chowdhury 2023, Section 4).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    L = check_positive_float("feature_bound", feature_bound)
    m = dp20_m(horizon)
    return math.sqrt(16.0 * m) * L * math.log(1.0 / delta) / epsilon
