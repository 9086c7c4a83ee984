r"""De-shuffling: an exact lower bound on the ε of shuffled Gaussian messages.

A shuffler hides *who* sent a message, not *what* it says.  When the adversary chooses the
data, it can make the target silo's message stand apart from the others, pick it out of the
shuffled multiset and read it as if no shuffler were there.  This module computes exactly
how much that attack learns, which is a lower bound on the ε of any protocol whose server
sees the multiset (Zhou & Chowdhury 2023's SDP by amplification, Thm. 6.3 via the Gaussian
amplification lemma of their App. E).

The view, one tree node
-----------------------
M silos each send m_i = S_i + N(0, σ₀² I): the noisy p-sum of one tree node.  The data
are the adversary's: every user of the target silo, in every batch of the node, holds the
same record v (so the target's p-sum is S_w = (N − 1)v + v_w with N users, v_w = v or the
neighbour record / nothing), and every user of the other silos holds a record v′ (zero, or
the record whose p-sum points away from the target's).  Fix a unit direction e and let
μ_w = ⟨S_w, e⟩ and c = ⟨S′, e⟩.  The statistic

.. math:: T = \max_{i \le M} \langle m_i, e\rangle

is a function of the multiset (it does not need the senders).  The M projections are
independent, N(μ_w, σ₀²) for the target and N(c, σ₀²) for each of the other M − 1, so

.. math:: F_w(t) = P_w[T \le t] = \Phi\Big(\frac{t-\mu_w}{\sigma_0}\Big)\,
          \Phi\Big(\frac{t-c}{\sigma_0}\Big)^{M-1} .

Over the κ tree nodes that contain the target user's batch, the node releases have
independent noise and the shuffles are independent, so the κ statistics T_1..T_κ are
independent given the data, with these laws (node j has N_j = B·2^j users per silo when
every batch is filled, B when only the user's batch is).  The pair of laws of
(T_1, …, T_κ) under the two neighbouring inputs is a post-processing of the server's view,
so its privacy profile δ_T(ε) (hockey-stick divergence, both directions) is at most the
protocol's: the smallest ε with δ_T(ε) ≤ δ is a **lower bound** on the protocol's ε.

How it is computed (a valid lower bound, not an estimate)
---------------------------------------------------------
1. Each T_j is binned on a fine grid of t (width ``t_step``·σ₀, two tail bins); the bin
   masses are differences of the closed-form F_w, computed in log space.  Binning is a
   post-processing, so the binned pair's divergence is at most T's.
2. The privacy loss of a bin, ℓ = log(p₁/p₀), is rounded *down* to a grid of width
   ``loss_step`` (losses above ``max_loss`` are rounded down to it, bins with ℓ below
   −``max_loss`` are dropped).  δ(ε) = E_P[(1 − e^{ε−ℓ})₊] increases with ℓ, so rounding
   down and dropping can only lower it.
3. The κ nodes' loss distributions are convolved (the privacy loss distribution of the
   product); δ(ε) is read off the result, in both directions (P = world 1 over world 0 and
   the reverse), and ε found by root finding.

So δ computed ≤ δ_T ≤ δ of the protocol, up to floating-point rounding (the convolution
uses an FFT: errors ~1e-13 in δ, far below any δ of interest).  Limits: M = 1 is the
Gaussian mechanism with sensitivity |μ₁ − μ₀| at σ₀ (Balle & Wang 2018), and so is any M
once μ_w − c ≫ σ₀ √(2 ln M): then the target's message is always the largest.

References
----------
.. [ZC23] X. Zhou and S. R. Chowdhury, "On differentially private federated linear contextual
   bandits", 2023 (Thm. 6.3; the amplification lemma of App. E).
.. [BW18] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential
   privacy", ICML 2018.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import fft, optimize
from scipy.special import log_ndtr

from fedbandit._validation import (
    MAX_STEPS,
    check_array,
    check_bool,
    check_choice,
    check_delta,
    check_finite_float,
    check_float_in_range,
    check_instance,
    check_nonnegative_float,
    check_positive_float,
    check_positive_int,
    check_str,
)
from fedbandit.accounting.composed_gaussian import exact_gaussian_epsilon
from fedbandit.accounting.events import DpEvent, check_relation

__all__ = [
    "DeshuffleScenario",
    "deshuffle_scenarios",
    "deshuffled_max_logpdf",
    "deshuffled_gaussian_delta",
    "deshuffled_gaussian_epsilon",
    "DeshuffledGaussianEvent",
    "deshuffled_event_epsilon",
]

#: Most tree nodes of one user (2^62 batches), and most messages per node.
_MAX_NODES = 62
_MAX_MESSAGES = 10**12
#: Most bins of T per node (memory: a few float arrays of that length).
_MAX_BINS = 400_000
#: Standard deviations beyond the means covered by the grid of T (tail bins hold the rest).
_TAIL = 12.0

FILLS = ("node", "batch")
DIRECTIONS = ("change", "bias")
OTHERS = ("opposite", "zero")


def _means(name: str, value: ArrayLike, n: int | None = None) -> np.ndarray:
    if isinstance(value, (str, bytes, dict, set)) or value is None:
        raise TypeError(f"{name} must be a sequence of finite floats (one per tree node), got {value!r:.80}")
    try:
        arr = np.atleast_1d(np.asarray(value, dtype=float))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a sequence of finite floats (one per tree node), got {value!r:.80}") from exc
    if arr.ndim != 1 or arr.size == 0 or arr.size > _MAX_NODES:
        raise ValueError(f"{name} must hold 1 to {_MAX_NODES} values (one per tree node), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(np.abs(arr) > 1e100):
        raise ValueError(f"{name} must contain finite values of magnitude at most 1e100, got {value!r:.80}")
    if n is not None and arr.size not in (1, n):
        raise ValueError(f"{name} must have one value per tree node ({n}) or one for all, got {arr.size}")
    return arr


# ---------------------------------------------------------------------------------------
# The adversary's data
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeshuffleScenario:
    """One choice of data for the de-shuffling attack, and the projections it gives.

    Records are x = s·e₁ with reward y, so a record's packed statistics (x y, upper triangle
    of x xᵀ) live in the plane of two coordinates, (bias₁, Gram₁₁) = (s y, s²), and the
    attack's direction is a unit vector (a, b) of that plane.

    Attributes
    ----------
    label : str
    direction : (float, float)
        (a, b): the weights of the bias₁ and Gram₁₁ coordinates in e.
    target : (float, float)
        (s, y) of every user of the target silo in the filled batches (the target user too).
    neighbour : (float, float) or None
        The target user's record in world 0 (None: absent, a zero record).
    others : (float, float) or None
        (s, y) of every user of the other silos in the filled batches (None: zero records).
    fill : {"node", "batch"}
        Which batches hold these records: every batch of the user's largest node, or only
        the user's own batch (batch 1).
    means0, means1, others_means : tuple of float
        Per tree node containing batch 1 (levels 0..κ−1): μ₀, μ₁ (the target's projection
        in world 0, 1) and c (every other silo's), in the data's units.
    """

    label: str
    direction: tuple
    target: tuple
    neighbour: tuple | None
    others: tuple | None
    fill: str
    means0: tuple
    means1: tuple
    others_means: tuple

    def __post_init__(self) -> None:
        check_str("label", self.label)
        check_choice("fill", self.fill, FILLS)
        for name in ("direction", "target") + (("neighbour",) if self.neighbour is not None else ()) + (
                ("others",) if self.others is not None else ()):
            v = getattr(self, name)
            if not (isinstance(v, tuple) and len(v) == 2):
                raise TypeError(f"{name} must be a tuple of two floats, got {v!r:.80}")
            for x in v:
                check_finite_float(name, x)
        a, b = self.direction
        if not math.isclose(math.hypot(a, b), 1.0, rel_tol=1e-9):
            raise ValueError(f"direction must be a unit vector (a, b), got {self.direction!r}")
        for name in ("means0", "means1", "others_means"):
            if not isinstance(getattr(self, name), tuple):
                raise TypeError(f"{name} must be a tuple of floats (one per tree node), got {getattr(self, name)!r:.80}")
        sizes = [_means(name, getattr(self, name)).size for name in ("means0", "means1", "others_means")]
        if len(set(sizes)) != 1:
            raise ValueError(f"means0, means1 and others_means must have one value per node each, got lengths {sizes}")


def _packed(record: tuple[float, float]) -> np.ndarray:
    s, y = record
    return np.array([s * y, s * s])


def _away(direction: Sequence[float], feature_bound: float, reward_bound: float) -> tuple[float, float] | None:
    """(s, y) with ‖x‖ ≤ L, |y| ≤ Y minimizing ⟨(s y, s²), (a, b)⟩ (b ≥ 0): −|s|Y|a| + s²b."""
    a, b = direction
    L, Y = feature_bound, reward_bound
    if a == 0.0:
        return None
    s = L if b <= 0.0 else min(L, Y * abs(a) / (2.0 * b))
    return (s, -math.copysign(Y, a))


def deshuffle_scenarios(batch_size: int, n_nodes: int, feature_bound: float = 1.0, reward_bound: float = 1.0,
                        relation: str = "add-remove", *, dominant: bool = False) -> tuple[DeshuffleScenario, ...]:
    """The adversary's data choices searched by the de-shuffling attack (stated, exhaustive).

    The target user is a user of batch 1 of the target silo: a user of batch b enters the
    nodes of levels j ≤ κ − 1 that close by batch K, each of 2^j batches, and batch 1 enters
    all κ of them, so it dominates every other batch (the users of a batch are exchangeable).
    Its record is the largest, x = L e₁, y = Y.  Its neighbour: absent (add/remove) or x = L e₁, y = −Y (replace: the
    reward flipped, a change 2LY).  Every scenario is one of

    * direction: ``"change"`` -- e along the change of the user's record (add/remove:
      (LY, L²)/‖·‖; replace: the bias coordinate), or ``"bias"`` -- e the bias₁ coordinate;
    * others: ``"opposite"`` -- every user of the other silos holds the record whose
      projection on e is smallest, x = s e₁ with s = min(L, Y a/(2b)) and y = −Y (so their
      p-sums point away from the target's), or ``"zero"`` -- zero records;
    * fill: ``"node"`` -- every batch 1..2^{κ−1} holds these records (node j has B·2^j
      users per silo), or ``"batch"`` -- only batch 1 (B users per silo in every node).

    Duplicates (replace: the two directions coincide) are removed.  ``dominant=True`` keeps
    only fill ``"node"`` and others ``"opposite"`` (the accountant's choice): more users per
    node and other p-sums further away can only set the target's message further apart --
    the tests check on the full search that these attain its maximum.  Returns a tuple of
    :class:`DeshuffleScenario`, the κ = ``n_nodes`` node means included.

    Parameters
    ----------
    batch_size : int
        B, the users of a batch.
    n_nodes : int
        κ, the nodes a user enters.
    feature_bound : float, default 1.0
        L.
    reward_bound : float, default 1.0
        Y.
    relation : {"add-remove", "replace"}, default "add-remove"
        The neighbouring relation.
    dominant : bool, default False
        Keep only the dominant scenarios (above).

    Returns
    -------
    tuple of DeshuffleScenario
    """
    B = check_positive_int("batch_size", batch_size, max_value=MAX_STEPS)
    kappa = check_positive_int("n_nodes", n_nodes, max_value=_MAX_NODES, reason="a user enters one node per tree level")
    L = check_positive_float("feature_bound", feature_bound)
    Y = check_positive_float("reward_bound", reward_bound)
    if L > 1e20 or Y > 1e20:
        raise ValueError(f"feature_bound and reward_bound must be at most 1e20 (squares of node sums overflow), got "
                         f"feature_bound={feature_bound!r}, reward_bound={reward_bound!r}")
    relation = check_relation(relation)
    dominant = check_bool("dominant", dominant)
    target = (L, Y)
    neighbour = None if relation == "add-remove" else (L, -Y)
    u1 = _packed(target)
    u0 = np.zeros(2) if neighbour is None else _packed(neighbour)
    change = u1 - u0
    dirs = {"change": tuple(float(x) for x in change / np.linalg.norm(change)), "bias": (1.0, 0.0)}
    out, seen = [], set()
    for dname in DIRECTIONS:
        e = dirs[dname]
        if e in seen:
            continue
        seen.add(e)
        ev = np.asarray(e)
        for oname in OTHERS[:1] if dominant else OTHERS:
            other = _away(e, L, Y) if oname == "opposite" else None
            c1 = 0.0 if other is None else float(_packed(other) @ ev)
            for fill in FILLS[:1] if dominant else FILLS:
                n = [B * 2**j if fill == "node" else B for j in range(kappa)]
                p1, p0 = float(u1 @ ev), float(u0 @ ev)
                out.append(DeshuffleScenario(
                    label=f"direction {dname}, others {oname}, fill {fill}",
                    direction=e, target=target, neighbour=neighbour, others=other, fill=fill,
                    means0=tuple((k - 1) * p1 + p0 for k in n), means1=tuple(k * p1 for k in n),
                    others_means=tuple(k * c1 for k in n),
                ))
    return tuple(out)


# ---------------------------------------------------------------------------------------
# The law of T and its exact privacy profile
# ---------------------------------------------------------------------------------------


def _log_cdf(t: np.ndarray | float, mean: float, other: float, n_messages: int) -> np.ndarray:
    """log F(t) in units of σ₀: log Φ(t − μ) + (M − 1) log Φ(t − c)."""
    return log_ndtr(t - mean) + (n_messages - 1) * log_ndtr(t - other)


def deshuffled_max_logpdf(t: ArrayLike, mean: float, others: float, n_messages: int, sigma0: float) -> np.ndarray:
    """log density of T = max_i ⟨m_i, e⟩: one N(μ, σ₀²) projection and M − 1 of N(c, σ₀²).

    f(t) = [φ(z₁)Φ(z₀)^{M−1} + (M − 1)Φ(z₁)φ(z₀)Φ(z₀)^{M−2}]/σ₀ with z₁ = (t − μ)/σ₀,
    z₀ = (t − c)/σ₀ (the derivative of F above).  Vectorized in ``t``.

    Parameters
    ----------
    t : float or array_like
        The point(s).
    mean : float
        μ, the target's projection.
    others : float
        c, the other messages' projection.
    n_messages : int
        M.
    sigma0 : float
        σ₀.

    Returns
    -------
    ndarray
        log f(t).
    """
    t = check_array("t", t, dtype=float)
    mu = check_finite_float("mean", mean)
    c = check_finite_float("others", others)
    M = check_positive_int("n_messages", n_messages, max_value=_MAX_MESSAGES)
    s = check_positive_float("sigma0", sigma0)
    z1, z0 = (t - mu) / s, (t - c) / s
    log_phi1 = -0.5 * z1**2 - 0.5 * math.log(2 * math.pi)
    log_phi0 = -0.5 * z0**2 - 0.5 * math.log(2 * math.pi)
    first = log_phi1 + (M - 1) * log_ndtr(z0)
    if M == 1:
        return first - math.log(s)
    second = math.log(M - 1) + log_ndtr(z1) + log_phi0 + (M - 2) * log_ndtr(z0)
    return np.logaddexp(first, second) - math.log(s)


def _bin_log_masses(a: float, c: float, M: int, grid: np.ndarray) -> np.ndarray:
    """log P[T/σ₀ in each bin]: (−∞, g₀], (g₀, g₁], …, (g_n, ∞), in log space."""
    logF = _log_cdf(grid, a, c, M)
    with np.errstate(divide="ignore"):
        logS = np.log(-np.expm1(logF))
        lo = logF[1:] + np.log(-np.expm1(np.minimum(logF[:-1] - logF[1:], 0.0)))
        hi = logS[:-1] + np.log(-np.expm1(np.minimum(logS[1:] - logS[:-1], 0.0)))
    inner = np.where(logF[1:] < math.log(0.5), lo, hi)
    return np.concatenate([[logF[0]], inner, [logS[-1]]])


def _grid(a0: float, a1: float, c: float, M: int, t_step: float) -> np.ndarray:
    """Bin edges of T/σ₀: fine where T's mass lies, around the target's projection (both worlds)
    and around the others' maximum (c + √(2 ln M)); one wide bin between (any partition is a
    post-processing)."""
    step = t_step / max(1.0, abs(a1 - a0))
    top = c + math.sqrt(2.0 * math.log(max(M, 2))) if M > 1 else min(a0, a1)
    parts = []
    for lo, hi in ((min(a0, a1) - _TAIL, max(a0, a1) + _TAIL), (top - _TAIL, top + _TAIL)):
        n = min(_MAX_BINS // 2, int(math.ceil((hi - lo) / step)))
        parts.append(np.linspace(lo, hi, n + 1))
    return np.unique(np.concatenate(parts))


#: Most points of the composed privacy loss grid: ``loss_step`` is widened beyond it.
_MAX_LOSS_POINTS = 200_000


#: A discretized privacy loss distribution: (offset, pmf, step h); loss k is (offset + k)·h.
_Pld = tuple[int, np.ndarray, float]


@functools.lru_cache(maxsize=256)
def _pld(key: tuple[Any, ...]) -> tuple[_Pld, _Pld]:
    """Both directions' discretized privacy loss distributions of the κ node statistics.

    ``key`` = (a0s, a1s, cs, M, t_step, loss_step, max_loss) in units of σ₀.  Returns
    ((offset, pmf, h) of world 1 over world 0, the same for the reverse): the loss of grid
    index k is (offset + k)·h, with h = ``loss_step``, widened so that the composed grid has
    at most :data:`_MAX_LOSS_POINTS` points.
    """
    a0s, a1s, cs, M, t_step, loss_step, max_loss = key
    nodes: tuple[list[tuple[np.ndarray, np.ndarray]], list[tuple[np.ndarray, np.ndarray]]] = ([], [])  # (losses, weights)
    for a0, a1, c in zip(a0s, a1s, cs):
        grid = _grid(a0, a1, c, M, t_step)
        lp0 = _bin_log_masses(a0, c, M, grid)
        lp1 = _bin_log_masses(a1, c, M, grid)
        for side, (lp, lq) in enumerate(((lp1, lp0), (lp0, lp1))):
            keep = np.isfinite(lp) & (lp > -700.0)  # P-mass below e^-700: dropped (lowers δ)
            with np.errstate(invalid="ignore"):
                loss = np.where(np.isfinite(lq), lp - lq, np.inf)
            keep &= loss >= -max_loss  # losses below −max_loss: dropped (lowers δ)
            nodes[side].append((np.minimum(loss[keep], max_loss), np.exp(lp[keep])))
    out = []
    for parts in nodes:
        span = sum(float(losses.max() - losses.min()) if losses.size else 0.0 for losses, _ in parts)
        h = max(loss_step, span / _MAX_LOSS_POINTS)
        off, pmfs = 0, []
        for loss, w in parts:
            if not loss.size:
                return ((0, np.zeros(1), h), (0, np.zeros(1), h))
            k = np.floor(loss / h).astype(np.int64)  # rounded down (lowers δ)
            off += int(k.min())
            pmfs.append(np.bincount(k - k.min(), weights=w))
        size = sum(p.size for p in pmfs) - len(pmfs) + 1
        if len(pmfs) == 1:
            pmf = pmfs[0]
        elif size <= 20_000:
            pmf = functools.reduce(np.convolve, pmfs)
        else:  # the product of the κ transforms, one inverse transform
            n = fft.next_fast_len(size, real=True)
            pmf = fft.irfft(functools.reduce(np.multiply, (fft.rfft(p, n) for p in pmfs)), n)[:size]
        out.append((off, np.maximum(pmf, 0.0), h))
    return out[0], out[1]


def _delta_of(pld: _Pld, epsilon: float) -> float:
    off, pmf, h = pld
    loss = (off + np.arange(pmf.size)) * h
    m = loss > epsilon
    return float(np.sum(pmf[m] * -np.expm1(epsilon - loss[m])))


def _key(sigma0: float, n_messages: int, means0: ArrayLike, means1: ArrayLike, others: ArrayLike, t_step: float,
         loss_step: float, max_loss: float) -> tuple[Any, ...]:
    s = check_positive_float("sigma0", sigma0)
    M = check_positive_int("n_messages", n_messages, max_value=_MAX_MESSAGES)
    m0 = _means("means0", means0)
    m1 = _means("means1", means1, m0.size)
    if m1.size != m0.size:
        raise ValueError(f"means0 and means1 must have the same length (one per node), got {m0.size} and {m1.size}")
    c = _means("others", others, m0.size)
    c = np.broadcast_to(c, m0.shape)
    t_step = check_float_in_range("t_step", t_step, 1e-4, 0.1)
    loss_step = check_float_in_range("loss_step", loss_step, 1e-5, 0.1)
    max_loss = check_float_in_range("max_loss", max_loss, 1.0, 700.0)
    if np.any(np.abs(np.concatenate([m0, m1, c])) / s > 1e12):
        raise ValueError(f"means0, means1 and others must be at most 1e12·sigma0 in magnitude (the grid of T spans "
                         f"them), got "
                         f"sigma0={sigma0!r} and means up to {np.max(np.abs(np.concatenate([m0, m1, c]))):.3g}")
    return (tuple(m0 / s), tuple(m1 / s), tuple(c / s), M, t_step, loss_step, max_loss)


def deshuffled_gaussian_delta(epsilon: float, sigma0: float, n_messages: int, means0: ArrayLike, means1: ArrayLike,
                              others: ArrayLike = 0.0, *, t_step: float = 0.002, loss_step: float = 1e-3,
                              max_loss: float = 60.0) -> float:
    """δ(ε) of the κ de-shuffled statistics T_j = max_i ⟨m_i, e⟩ (a lower bound on the protocol's).

    Parameters
    ----------
    epsilon : float ≥ 0
    sigma0 : float
        Per-message noise standard deviation σ₀.
    n_messages : int
        M, the messages of one node (one per silo).
    means0, means1 : sequence of float
        Per node j: μ_w = ⟨S_w, e⟩, the target silo's projection in world w.
    others : float or sequence of float, default 0
        Per node: c = ⟨S′, e⟩, the other M − 1 messages' projection.
    t_step, loss_step, max_loss : float
        The discretization (see the module docstring): each only lowers δ.

    Returns
    -------
    float
        max of the two directions' hockey-stick divergences of the binned, loss-rounded
        laws of (T_1, …, T_κ): at most the exact δ_T(ε), hence at most the protocol's.
    """
    epsilon = check_nonnegative_float("epsilon", epsilon)
    key = _key(sigma0, n_messages, means0, means1, others, t_step, loss_step, max_loss)
    a, b = _pld(key)
    return max(_delta_of(a, epsilon), _delta_of(b, epsilon))


def deshuffled_gaussian_epsilon(delta: float, sigma0: float, n_messages: int, means0: ArrayLike, means1: ArrayLike,
                                others: ArrayLike = 0.0, *, t_step: float = 0.002, loss_step: float = 1e-3,
                                max_loss: float = 60.0) -> float:
    """Smallest ε with :func:`deshuffled_gaussian_delta` (ε) ≤ δ: a lower bound on the protocol's ε.

    Any protocol whose adversary sees the shuffled multiset of the κ nodes' messages on
    these data is at best (ε, δ)-DP with this ε (post-processing; the discretization only
    lowers it).  Parameters as in :func:`deshuffled_gaussian_delta`.

    Parameters
    ----------
    delta : float
        The target δ.
    sigma0, n_messages, means0, means1, others, t_step, loss_step, max_loss
        As in :func:`deshuffled_gaussian_delta`.

    Returns
    -------
    float
        ε.
    """
    delta = check_delta("delta", delta)
    key = _key(sigma0, n_messages, means0, means1, others, t_step, loss_step, max_loss)
    eps = 0.0
    for pld in _pld(key):
        if _delta_of(pld, eps) <= delta:
            continue
        hi = (pld[0] + pld[1].size) * pld[2]
        if _delta_of(pld, hi) > delta:  # only the capped losses remain: ε ≥ max_loss
            eps = max(eps, hi)
            continue
        eps = max(eps, float(optimize.brentq(lambda e: _delta_of(pld, e) - delta, eps, hi, xtol=1e-9)))
    return eps


# ---------------------------------------------------------------------------------------
# The event
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeshuffledGaussianEvent(DpEvent):
    """The server's view of M shuffled Gaussian messages per node, as a necessary condition.

    What the server of a shuffle protocol sees over the κ nodes a user enters: for each,
    the multiset of M messages S_i + N(0, σ₀² I).  The accountant uses it as a
    :class:`~fedbandit.accounting.events.ClaimedEvent`'s ``necessary`` event: its lower
    bound on ε (:func:`deshuffled_event_epsilon`) is the larger of

    * the de-shuffling attack's exact ε (:func:`deshuffled_gaussian_epsilon`) on the worst
      of ``scenarios`` (the adversary's data choices, :func:`deshuffle_scenarios`), and
    * the exact ε of ``summed`` (the sum of the messages, a Gaussian event) if given,

    both functions of the multiset, hence lower bounds on the protocol's ε.

    Attributes
    ----------
    sigma0 : float
        σ₀, each message's noise.
    n_messages : int
        M, the messages of one node.
    scenarios : tuple of DeshuffleScenario
        The adversary's data choices searched.
    summed : DpEvent, optional
        The Gaussian event of the messages' sum.
    """

    sigma0: float
    n_messages: int
    scenarios: tuple
    summed: DpEvent | None = None

    def __post_init__(self) -> None:
        check_positive_float("sigma0", self.sigma0)
        check_positive_int("n_messages", self.n_messages, max_value=_MAX_MESSAGES)
        if not isinstance(self.scenarios, tuple) or not self.scenarios:
            raise TypeError(f"scenarios must be a non-empty tuple of DeshuffleScenario, got {self.scenarios!r:.80}")
        for s in self.scenarios:
            check_instance("scenarios", s, DeshuffleScenario)
        if self.summed is not None:
            check_instance("summed", self.summed, DpEvent)

    def describe(self) -> str:
        return (f"the shuffled multiset of {self.n_messages} Gaussian messages (σ₀={self.sigma0:.4g}) per node over "
                f"{len(self.scenarios[0].means0)} nodes, de-shuffled on the adversary's data")


def deshuffled_event_epsilon(event: DeshuffledGaussianEvent, delta: float) -> tuple[float, DeshuffleScenario, float]:
    """(ε, scenario, ε of the sum) of a :class:`DeshuffledGaussianEvent`: its exact lower bounds.

    ε is the largest de-shuffled ε over the event's scenarios and ``scenario`` the one
    that attains it; the sum's exact ε (Balle & Wang, composed over the nodes) is returned
    separately (NaN without ``summed``).

    Parameters
    ----------
    event : DeshuffledGaussianEvent
    delta : float
        The target δ.

    Returns
    -------
    (float, DeshuffleScenario, float)
        (ε, the scenario attaining it, ε of the sum or NaN).
    """
    check_instance("event", event, DeshuffledGaussianEvent)
    delta = check_delta("delta", delta)
    best, arg = -1.0, None
    for s in event.scenarios:
        e = deshuffled_gaussian_epsilon(delta, event.sigma0, event.n_messages, s.means0, s.means1, s.others_means)
        if e > best:
            best, arg = e, s
    assert arg is not None, "a DeshuffledGaussianEvent holds at least one scenario"
    summed = math.nan
    if event.summed is not None:
        summed = exact_gaussian_epsilon(event.summed, delta)
    return best, arg, summed
