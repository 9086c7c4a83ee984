"""Calibration and accounting rules of private continual counting (Chan, Shi & Song 2011).

Every Laplace scale of the counting mechanisms of
:mod:`fedbandit.mechanisms.continual_counting` comes from here (built on
:func:`fedbandit.accounting.calibration.laplace_counter_scale`, b = releases·s/ε: an item
that enters ``releases`` Laplace releases of scale b is (releases·s/b)-DP by basic
composition):

* :func:`hybrid_counter_scales` -- the hybrid mechanism: ε/2 for the logarithmic part
  (one release per item, ``Lap(2s/ε)``) and ε/2 for the binary tree of interval k (k nodes
  per item, ``Lap(2ks/ε)``);
* :func:`binary_counter_scale` -- the binary mechanism over ``n_steps`` items (L =
  bit_length(n_steps) nodes per item, ``Lap(Ls/ε)``);
* :func:`per_item_counter_scale` -- one release per item, ``Lap(s/ε)`` (the logarithmic
  mechanism, and the per-item Laplace counter, the baseline Chan et al.'s tree mechanisms
  improve on): an item in one release of scale s/ε is ε-DP by the Laplace mechanism.

:func:`account_pure` accounts a pure ε-DP event with :func:`fedbandit.accounting.account`
and states the target as (ε, 0).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike

from fedbandit._validation import (
    MIN_DELTA,
    check_epsilon,
    check_nonnegative_int,
    check_positive_array,
    check_positive_int,
)
from fedbandit.accounting.accountant import Accounting, account
from fedbandit.accounting.calibration import laplace_counter_scale
from fedbandit.accounting.events import DpEvent

__all__ = [
    "hybrid_counter_scales",
    "binary_counter_scale",
    "per_item_counter_scale",
    "account_pure",
]


def hybrid_counter_scales(epsilon: ArrayLike, sensitivity: float = 1.0) -> tuple[float | np.ndarray, float | np.ndarray]:
    """``(b_log, b_level)`` of the hybrid mechanism at privacy ``epsilon`` (scalar or array).

    ``b_log = 2s/ε`` is the scale of the logarithmic releases at the powers of two; the
    binary tree of interval ``k`` (items ``2^k + 1, ..., 2^{k+1} - 1``) uses ``k · b_level``
    with ``b_level = 2s/ε`` per node, since each of its items enters at most ``k`` nodes.
    Both halves are then ε/2-DP for every item, so the whole stream is ε-DP (Chan, Shi &
    Song 2011, Theorem 4.7).

    Parameters
    ----------
    epsilon : float or array_like
        ε (one per stream for an array).
    sensitivity : float, default 1.0
        s.

    Returns
    -------
    (float or ndarray, float or ndarray)
        (b_log, b_level).
    """
    b = laplace_counter_scale(epsilon, sensitivity, releases=2)
    return b, b


def binary_counter_scale(epsilon: ArrayLike, n_steps: int, sensitivity: float = 1.0) -> float | np.ndarray:
    """Node scale ``L s / ε`` of the binary mechanism over ``n_steps`` items, ``L = bit_length(n_steps)``.

    Parameters
    ----------
    epsilon : float or array_like
        ε (one per stream for an array).
    n_steps : int
        The stream's length.
    sensitivity : float, default 1.0
        s.

    Returns
    -------
    float or ndarray
        The node scale.
    """
    n_steps = check_positive_int("n_steps", n_steps)
    return laplace_counter_scale(epsilon, sensitivity, releases=n_steps.bit_length())


def per_item_counter_scale(epsilon: ArrayLike, sensitivity: float = 1.0) -> float | np.ndarray:
    """Scale ``s / ε`` of a mechanism in which every item enters exactly one Laplace release.

    Parameters
    ----------
    epsilon : float or array_like
        ε (one per stream for an array).
    sensitivity : float, default 1.0
        s.

    Returns
    -------
    float or ndarray
        The scale.
    """
    return laplace_counter_scale(epsilon, sensitivity, releases=1)


def account_pure(event: DpEvent, *, target_epsilon: float, model: str = "", relation: str = "replace",
                 theorem: str = "", notes: str = "") -> Accounting:
    """:func:`fedbandit.accounting.account` of a pure ε-DP target: the accounting with target δ = 0.

    :func:`~fedbandit.accounting.account` takes a target δ in (0, 1); a pure-DP target is
    met iff the event's ε is at most ``target_epsilon`` with δ = 0, which holds for every
    positive target δ, so the smallest δ the accountant takes (1e-300) is passed and the result's target
    δ reported as 0 (an event with a positive δ then comes out "invalid").

    Parameters
    ----------
    event : DpEvent
        What was released.
    target_epsilon : float
        The pure-DP target ε.
    model : str
        The privacy model.
    relation : {"add-remove", "replace"}, default "replace"
        The neighbouring relation.
    theorem, notes : str
        As for :func:`fedbandit.accounting.account`.

    Returns
    -------
    Accounting
        With target δ = 0.
    """
    acc = account(event, target_epsilon=target_epsilon, target_delta=MIN_DELTA, model=model, relation=relation,
                  theorem=theorem, notes=notes)
    return replace(acc, target_delta=0.0)


# ---------------------------------------------------------------------------------------
# The constants of the hard family Δ_{n,k} of Tenenbaum et al.'s PSCO lower bound.  Functions
# of ε, so they live in the accounting layer (which alone divides by a privacy parameter);
# exported from fedbandit.mechanisms.psco, which draws the family, and fedbandit.theory.psco.
# ---------------------------------------------------------------------------------------


def c_epsilon(epsilon: float) -> float:
    """c_ε = e^ε / (e^{2ε} + 1), the constant of the hard family Δ_{n,k} (the paper's lower-bound section).

    It lies in (0, 1/2) and decreases in ε (c_ε → 1/2 as ε → 0).

    Parameters
    ----------
    epsilon : float
        ε > 0.

    Returns
    -------
    float
        c_ε (0 where it underflows, ε ≥ 700).
    """
    epsilon = check_epsilon("epsilon", epsilon)
    # e^ε/(e^{2ε}+1) = 1/(e^ε + e^{−ε}) avoids overflow for large ε.
    return 1.0 / (math.exp(epsilon) + math.exp(-epsilon)) if epsilon < 700 else 0.0


def rep_nk(n: ArrayLike, k: int, epsilon: float) -> float | np.ndarray:
    """rep_{n,k} = ½ n^{1/(2k+1)} c_ε^{2k/(2k+1)}: the run length of Δ_{n,k} and the lower bound.

    Every (n, α, β) binary PSCO algorithm with k concurrent shufflers has
    α = Ω̃(rep_{n,k}) on some distribution of Δ_{n,k} (Tenenbaum et al., lower-bound theorem).
    ``n`` may be an array; ``k = 0`` (no shuffler) gives ½ n.

    Parameters
    ----------
    n : float or array_like
        n > 0.
    k : int
        The number of shufflers (k ≥ 0).
    epsilon : float
        ε.

    Returns
    -------
    float or ndarray
        rep_{n,k} (a float for a scalar ``n``).
    """
    n_arr = check_positive_array("n", n)  # real "sizes" too (rep_{Big_{n,k}, k−1}): any n > 0
    k = check_nonnegative_int("k", k)
    c = c_epsilon(epsilon)
    out = 0.5 * n_arr ** (1.0 / (2 * k + 1)) * c ** (2.0 * k / (2 * k + 1))
    return float(out) if np.ndim(out) == 0 else out


def big_nk(n: ArrayLike, k: int, epsilon: float) -> float | np.ndarray:
    """Big_{n,k} = n^{(2k−1)/(2k+1)} c_ε^{2/(2k+1)}: the "large batch" threshold of the induction.

    If an algorithm ever runs a shuffle mechanism over at least Big_{n,k} users, the
    other k − 1 shufflers must solve PSCO inside that batch, and
    rep_{Big_{n,k}, k−1} = rep_{n,k}; otherwise the single bits of Δ_{n,k} spaced Big_{n,k}
    apart give error Ω̃(sqrt(n / Big_{n,k})) = Ω̃(rep_{n,k}).

    Parameters
    ----------
    n : float or array_like
        n > 0.
    k : int
        The number of shufflers (k ≥ 1).
    epsilon : float
        ε.

    Returns
    -------
    float or ndarray
        Big_{n,k} (a float for a scalar ``n``).
    """
    n_arr = check_positive_array("n", n)  # real "sizes" too (rep_{Big_{n,k}, k−1}): any n > 0
    k = check_positive_int("k", k)
    c = c_epsilon(epsilon)
    out = n_arr ** ((2.0 * k - 1) / (2 * k + 1)) * c ** (2.0 / (2 * k + 1))
    return float(out) if np.ndim(out) == 0 else out
