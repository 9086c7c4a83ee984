"""Theory of fixed-batch private federated LinUCB (Zhou & Chowdhury 2023).

Noise levels, the regularizer λ and radius β, regret bounds and communication counts, as
functions, each naming what it implements.  Labels say what a formula rests on: [paper]
for what the paper states, cited by number where the statement has one; [reading] for
results the paper states only up to constants and logarithmic factors (Lemma 6.7's
conclusion, the λ and β of its analysis), written out by the package with every constant
1 -- meant for *shapes*: scaling in M, T, ε, not absolute values (chapter 2's
Reconstruction boxes "the lines of Algorithm 1, λ and β" and "the bounds are shapes");
[authors' code] for the formulas of the authors' experiment code, which the book's
experiments follow.

Notation: M agents, horizon T, batch size B, K = T/B batches, κ = ⌊log₂ K⌋ + 1 tree
levels, d dimension, (ε, δ) privacy, α failure probability.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from fedbandit._combinatorics import tree_depth
from fedbandit._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_nonnegative_float,
    check_positive_array,
    check_positive_float,
    check_positive_int,
    check_probability,
)
from fedbandit.accounting.amplification import zc_amplification_validity
from fedbandit.accounting.calibration import central_sigma, ldp_total_variance
from fedbandit.protocols import create

__all__ = [
    "check_batch_schedule",
    "n_batches",
    "kappa",
    "regularizer_lambda",
    "confidence_radius",
    "lemma67_regret_bound",
    "regret_bound_ldp",
    "regret_bound_sdp",
    "regret_bound_super_agent",
    "regret_bound_nonprivate",
    "communication_rounds",
    "optimal_batch_size",
    "nearest_divisor",
    "fixed_batch_noise_levels",
    "PRIVACY_COST_EXPONENT_M",
    "MAX_HORIZON",
]

#: Exponent of M in the privacy cost of the regret [paper]: Õ(M^{3/4} sqrt(T/ε)) under
#: silo-level LDP, Õ(sqrt(MT/ε)) under SDP and for the central-DP super agent.
PRIVACY_COST_EXPONENT_M = {"silo-LDP": 0.75, "SDP": 0.5, "central": 0.5}


#: Largest horizon of the functions that search the divisors of T (√T steps) [a cap on the
#: running time: 10^6 steps; the book's horizons are at most ~10^5].
MAX_HORIZON = 10**12
_HORIZON_REASON = "the divisor search over T takes sqrt(T) steps"


def _check_horizon(horizon) -> int:
    return check_positive_int("horizon", horizon, max_value=MAX_HORIZON, reason=_HORIZON_REASON)


def _divisors(T: int) -> list[int]:
    small = [b for b in range(1, math.isqrt(T) + 1) if T % b == 0]
    return sorted(set(small + [T // b for b in small]))


def check_batch_schedule(horizon, batch_size) -> tuple[int, int]:
    """Validate T and B (B divides T, Algorithm 1's assumption [paper]); return (T, B).

    Parameters
    ----------
    horizon : int
        T, the rounds per agent.
    batch_size : int
        B, the rounds between synchronizations (a divisor of T).

    Returns
    -------
    (int, int)
        (T, B), checked.
    """
    horizon = _check_horizon(horizon)
    batch_size = check_positive_int("batch_size", batch_size)
    if batch_size > horizon:
        raise ValueError(f"batch_size must be <= horizon={horizon}, got {batch_size}")
    if horizon % batch_size:
        raise ValueError(
            f"horizon T={horizon} must be divisible by batch_size B={batch_size} "
            f"(Algorithm 1 assumes T/B batches); nearest valid B: "
            f"{max(b for b in _divisors(horizon) if b <= batch_size)}"
        )
    return horizon, batch_size


def n_batches(horizon, batch_size) -> int:
    """K = T/B, the number of synchronizations of Algorithm 1 [paper].

    Parameters
    ----------
    horizon : int
        T, the rounds per agent.
    batch_size : int
        B, the rounds between synchronizations (a divisor of T).

    Returns
    -------
    int
        K = T/B.
    """
    T, B = check_batch_schedule(horizon, batch_size)
    return T // B


def kappa(n_batches_: int) -> int:
    """κ = ⌊log₂ K⌋ + 1 = 1 + log K (rounded down) [paper, Algorithm 2].

    Parameters
    ----------
    n_batches_ : int
        K, the number of synchronizations (≥ 1).

    Returns
    -------
    int
        κ = ⌊log₂ K⌋ + 1.
    """
    return tree_depth(check_positive_int("n_batches", n_batches_))


def regularizer_lambda(
    sigma, dim, n_batches_, alpha, *, rule: str = "authors", horizon=None, batch_size=None, lam_min: float = 1.0
) -> float:
    """Regularizer λ of Algorithm 1 for a total noise level σ (Lemma 6.7's σ).

    ``"authors"`` [authors' code]: λ = max(λ_min, σ (sqrt(κ + log(1/α)) + sqrt(d)));
    ``"paper"`` [reading]: λ = max(λ_min, σ (sqrt(d) + sqrt(log(T/(Bα))))), the paper's
    λ = Θ(max{1, σ(sqrt d + sqrt(log(T/(Bα))))}) with constant 1.
    The authors use λ_min = sqrt(M) for their federated learners.

    Parameters
    ----------
    sigma : float
        σ, the per-entry standard deviation of the total injected noise (≥ 0).
    dim : int
        d, the feature dimension.
    n_batches_ : int
        K, the number of synchronizations (sets κ).
    alpha : float
        The failure probability α.
    rule : {"authors", "paper"}, default "authors"
        Which formula (above).
    horizon, batch_size : int, optional
        T and B; required by ``rule="paper"``.
    lam_min : float, default 1.0
        The floor λ_min.

    Returns
    -------
    float
        λ.
    """
    sigma = check_nonnegative_float("sigma", sigma)
    dim = check_positive_int("dim", dim)
    alpha = check_probability("alpha", alpha)
    check_choice("rule", rule, ("authors", "paper"))
    lam_min = check_positive_float("lam_min", lam_min)
    k = kappa(n_batches_)
    if rule == "authors":
        lam = sigma * (math.sqrt(k + math.log(1.0 / alpha)) + math.sqrt(dim))
    else:
        if horizon is None or batch_size is None:
            raise ValueError("rule='paper' needs horizon and batch_size")
        T, B = check_batch_schedule(horizon, batch_size)
        lam = sigma * (math.sqrt(dim) + math.sqrt(math.log(T / (B * alpha))))
    return max(lam_min, lam)


def confidence_radius(
    t,
    lam,
    dim,
    n_agents,
    alpha,
    *,
    noise_std: float = 0.5,
    param_bound: float | None = None,
    feature_bound: float = 1.0,
    rule: str = "authors",
    scale: float = 1.0,
):
    """Radius β_t of the confidence ellipsoid at round t (array-friendly in t).

    ``"authors"`` [authors' code]:
    β_t = c (sqrt(λ) S + R sqrt(d log(1 + t M L²/(dλ)) + log(1/α))), with S = sqrt(d) by
    default, R the reward-noise level, L the feature bound and c = ``scale`` (their "crs").
    ``"paper"`` [reading]: β_t = c (R sqrt(2 log(2/α) + d log(1 + M t/(dλ))) + sqrt(λ) S), the
    paper's β with its O(sqrt λ) term read as sqrt(λ) S.

    Parameters
    ----------
    t : int, float or array_like
        The round(s) t ≥ 0.
    lam : float
        The regularizer λ > 0.
    dim : int
        d, the feature dimension.
    n_agents : int
        M, the number of agents.
    alpha : float
        The failure probability α.
    noise_std : float, default 0.5
        R, the reward-noise level.
    param_bound : float, optional
        S, the bound on ‖θ*‖ (default sqrt(d)).
    feature_bound : float, default 1.0
        L, the bound on the features' norms.
    rule : {"authors", "paper"}, default "authors"
        Which formula (above).
    scale : float, default 1.0
        c, a multiplier of the radius.

    Returns
    -------
    float or ndarray
        β_t at each t (a float for a scalar ``t``).
    """
    lam = check_positive_float("lam", lam)
    dim = check_positive_int("dim", dim)
    n_agents = check_positive_int("n_agents", n_agents)
    alpha = check_probability("alpha", alpha)
    noise_std = check_nonnegative_float("noise_std", noise_std)
    feature_bound = check_positive_float("feature_bound", feature_bound)
    scale = check_nonnegative_float("scale", scale)
    check_choice("rule", rule, ("authors", "paper"))
    S = math.sqrt(dim) if param_bound is None else check_nonnegative_float("param_bound", param_bound)
    t = check_positive_array("t", t, allow_zero=True)
    log_det = dim * np.log1p(t * n_agents * feature_bound**2 / (dim * lam))
    if rule == "authors":
        beta = math.sqrt(lam) * S + noise_std * np.sqrt(log_det + math.log(1.0 / alpha))
    else:
        beta = noise_std * np.sqrt(2.0 * math.log(2.0 / alpha) + log_det) + math.sqrt(lam) * S
    beta = scale * beta
    return float(beta) if beta.ndim == 0 else beta


def lemma67_regret_bound(horizon, n_agents, batch_size, dim, sigma, alpha=0.01) -> float:
    """Generic regret bound of Lemma 6.7 (Zhou & Chowdhury) [reading: shape, constant 1].

    Reg(T) ≲ d M B log T + d sqrt(MT) log(MT/α) + sqrt(σ M T) d^{3/4} log(MT/α),
    where σ bounds the per-entry standard deviation of the total injected noise (its
    hypotheses: independent sub-Gaussian entries, symmetric for the Gram matrix).

    Parameters
    ----------
    horizon : int
        T, the rounds per agent.
    n_agents : int
        M, the number of agents.
    batch_size : int
        B, the rounds between synchronizations (a divisor of T).
    dim : int
        d, the feature dimension.
    sigma : float
        σ, the per-entry standard deviation of the total injected noise (≥ 0).
    alpha : float, default 0.01
        The failure probability α of the bound.

    Returns
    -------
    float
        The bound's value.
    """
    T, B = check_batch_schedule(horizon, batch_size)
    M = check_positive_int("n_agents", n_agents)
    d = check_positive_int("dim", dim)
    sigma = check_nonnegative_float("sigma", sigma)
    alpha = check_probability("alpha", alpha)
    L = math.log(M * T / alpha)
    return d * M * B * math.log(T) + d * math.sqrt(M * T) * L + math.sqrt(sigma * M * T) * d**0.75 * L


def regret_bound_ldp(horizon, n_agents, dim, epsilon, delta, batch_size=None, alpha=0.01) -> float:
    """Silo-level LDP regret Õ(M^{3/4} sqrt(T/ε)) (Corollary 6.2) via Lemma 6.7 with σ² = Mκσ₀² [paper; shape: reading].

    ``batch_size`` defaults to the paper's choice B = sqrt(T/M) rounded to a divisor of T.

    Parameters
    ----------
    horizon : int
        T, the rounds per agent.
    n_agents : int
        M, the number of agents.
    dim : int
        d, the feature dimension.
    epsilon, delta : float
        The privacy target (ε, δ).
    batch_size : int, optional
        B (a divisor of T); default :func:`optimal_batch_size`.
    alpha : float, default 0.01
        The failure probability α of the bound.

    Returns
    -------
    float
        The bound's value.
    """
    T = _check_horizon(horizon)
    M = check_positive_int("n_agents", n_agents)
    B = optimal_batch_size(T, M) if batch_size is None else batch_size
    K = n_batches(T, B)
    sigma = math.sqrt(ldp_total_variance(epsilon, delta, K, M))
    return lemma67_regret_bound(T, M, B, dim, sigma, alpha)


def regret_bound_sdp(horizon, n_agents, dim, epsilon, delta, batch_size=None, alpha=0.01) -> float:
    """SDP regret Õ(sqrt(MT/ε)) (Corollary 6.4) via Lemma 6.7, σ² ≈ κσ₀²_LDP (1/M amplified) [paper; shape: reading].

    Uses the idealized amplified noise σ₀² = σ₀²_LDP / M (the paper's "roughly 1/M of the
    LDP noise"), so that the shape in M is the theorem's, without the validity caveats of
    :func:`fedbandit.accounting.amplification.zc_amplification_sigma0`.

    Parameters
    ----------
    horizon : int
        T, the rounds per agent.
    n_agents : int
        M, the number of agents.
    dim : int
        d, the feature dimension.
    epsilon, delta : float
        The privacy target (ε, δ).
    batch_size : int, optional
        B (a divisor of T); default :func:`optimal_batch_size`.
    alpha : float, default 0.01
        The failure probability α of the bound.

    Returns
    -------
    float
        The bound's value.
    """
    T = _check_horizon(horizon)
    M = check_positive_int("n_agents", n_agents)
    B = optimal_batch_size(T, M) if batch_size is None else batch_size
    K = n_batches(T, B)
    sigma = math.sqrt(ldp_total_variance(epsilon, delta, K, M) / M)
    return lemma67_regret_bound(T, M, B, dim, sigma, alpha)


def regret_bound_super_agent(horizon, n_agents, dim, epsilon, delta) -> float:
    """Central-DP super agent over MT rounds [paper]: d sqrt(MT) + sqrt(MT) d^{3/4} log^{1/4}(1/δ)/sqrt(ε).

    Constant 1, log factors in T dropped as in the paper's display.

    Parameters
    ----------
    horizon : int
        T, the rounds per agent.
    n_agents : int
        M, the number of agents.
    dim : int
        d, the feature dimension.
    epsilon, delta : float
        The privacy target (ε, δ).

    Returns
    -------
    float
        The bound's value.
    """
    T = check_positive_int("horizon", horizon)
    M = check_positive_int("n_agents", n_agents)
    d = check_positive_int("dim", dim)
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    n = M * T
    return d * math.sqrt(n) + math.sqrt(n) * d**0.75 * math.log(1.0 / delta) ** 0.25 / math.sqrt(epsilon)


def regret_bound_nonprivate(horizon, n_agents, dim, batch_size=None, alpha=0.01) -> float:
    """Lemma 6.7 without noise (σ = 0): d M B log T + d sqrt(MT) log(MT/α) [reading: shape, constant 1].

    Section 6.1 calls the privacy-free first term of its regret bound "a representative regret
    bound for federated LCBs without privacy constraint".

    Parameters
    ----------
    horizon : int
        T, the rounds per agent.
    n_agents : int
        M, the number of agents.
    dim : int
        d, the feature dimension.
    batch_size : int, optional
        B (a divisor of T); default :func:`optimal_batch_size`.
    alpha : float, default 0.01
        The failure probability α of the bound.

    Returns
    -------
    float
        The bound's value.
    """
    T = _check_horizon(horizon)
    M = check_positive_int("n_agents", n_agents)
    B = optimal_batch_size(T, M) if batch_size is None else batch_size
    return lemma67_regret_bound(T, M, B, dim, 0.0, alpha)


def communication_rounds(horizon, batch_size) -> int:
    """Number of synchronizations T/B of Algorithm 1 [paper]; O(sqrt(MT)) at B = sqrt(T/M).

    Parameters
    ----------
    horizon : int
        T, the rounds per agent.
    batch_size : int
        B, the rounds between synchronizations (a divisor of T).

    Returns
    -------
    int
        T/B.
    """
    return n_batches(horizon, batch_size)


def optimal_batch_size(horizon, n_agents) -> int:
    """The divisor of T closest to sqrt(T/M) (the paper's B = sqrt(T/M)) [paper].

    Ties go to the smaller divisor (more communication, less delay).

    Parameters
    ----------
    horizon : int
        T, the rounds per agent.
    n_agents : int
        M, the number of agents.

    Returns
    -------
    int
        A divisor B of T.
    """
    T = _check_horizon(horizon)
    M = check_positive_int("n_agents", n_agents)
    target = math.sqrt(T / M)
    return min(_divisors(T), key=lambda b: (abs(math.log(b / target)), b))


def nearest_divisor(horizon: int, batch_size: float) -> int:
    """The divisor of T closest to ``batch_size`` (ties to the smaller): a batch size the schedule allows.

    Parameters
    ----------
    horizon : int
        T, the rounds per agent.
    batch_size : float
        The wanted batch size, positive.

    Returns
    -------
    int
        A divisor B of T.
    """
    T = _check_horizon(horizon)
    batch_size = check_positive_float("batch_size", batch_size)
    return min(_divisors(T), key=lambda b: abs(b - batch_size))


def fixed_batch_noise_levels(n_agents: int = 100, epsilon: float = 0.1, delta: float = 0.1, horizon: int = 10_000,
                             batch_size: int | str = 25, *, dim: int = 10) -> dict:
    """Each privacy model's total noise level σ per Gram/bias entry of the fixed-batch learner at one setting.

    The σ that Lemma 6.7 of Zhou & Chowdhury (2023) takes (the std of the total noise in a
    synchronized prefix sum), for every protocol of their Section 5 at (ε, δ), M agents,
    horizon T and batch size B (rounded to the nearest divisor of T, :func:`nearest_divisor`;
    ``"sqrt(T/M)"`` is :func:`optimal_batch_size`), K = T/B:

    * silo-level LDP: σ = sqrt(M κ σ₀²) (:func:`~fedbandit.accounting.calibration.ldp_total_variance`);
    * SDP by amplification: the server's noise std of the ``sdp-amplification`` protocol as the
      authors calibrate it (forced outside the lemma's validity region, NaN where the protocol
      refuses the setting), and the ideal σ(LDP)/sqrt(M);
    * central DP: sqrt(κ)·σ₀ of the tree at the trusted server
      (:func:`~fedbandit.accounting.calibration.central_sigma`), κ = :func:`kappa` (K).

    Parameters
    ----------
    n_agents : int, default 100
        M.
    epsilon, delta : float, default 0.1, 0.1
        The target (ε, δ).
    horizon : int, default 10 000
        T.
    batch_size : int or "sqrt(T/M)", default 25
        B before rounding to a divisor of T.
    dim : int, default 10
        d, for configuring the amplification protocol.

    Returns
    -------
    dict
        ``B``, ``K``, ``kappa``, ``sigma_ldp``, ``sigma_amp`` (NaN if refused), ``sigma_amp_ideal``,
        ``sigma_central``, ``valid`` (every condition of
        :func:`~fedbandit.accounting.amplification.zc_amplification_validity` holds, at min(ε, 10⁶)) and
        ``sum_ok`` (the authors' amplification noise at least the central tree's: the
        server's sum stays private).
    """
    T = _check_horizon(horizon)
    M = check_positive_int("n_agents", n_agents)
    if isinstance(batch_size, str):
        if batch_size != "sqrt(T/M)":
            raise ValueError(f"batch_size must be a positive number or 'sqrt(T/M)', got {batch_size!r}")
        B = optimal_batch_size(T, M)
    else:
        B = nearest_divisor(T, check_positive_float("batch_size", batch_size))
    K = T // B
    s_ldp = math.sqrt(ldp_total_variance(epsilon, delta, K, M))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # forced outside the lemma's region: reported by ``valid``
            s_amp = create("sdp-amplification", epsilon=epsilon, delta=delta, force=True).configure(
                n_agents=M, dim=dim, n_batches=K, batch_size=B).server_noise_std()
    except ValueError:
        s_amp = float("nan")
    s_central = math.sqrt(kappa(K)) * central_sigma(epsilon, delta, K)
    conds = zc_amplification_validity(min(epsilon, 1e6), delta, M, K, T)
    return {"B": B, "K": K, "kappa": kappa(K), "sigma_ldp": s_ldp, "sigma_amp": s_amp,
            "sigma_amp_ideal": s_ldp / math.sqrt(M), "sigma_central": s_central,
            "valid": all(c.holds for c in conds),
            "sum_ok": s_amp == s_amp and s_amp >= s_central}
