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
  mechanism, and the per-item Laplace counter: Chan et al.'s simple counting mechanism
  II [recalled]).

:func:`account_pure` accounts a pure ε-DP event with :func:`fedbandit.accounting.account`
and states the target as (ε, 0).
"""

from __future__ import annotations

from dataclasses import replace

from fedbandit._validation import MIN_DELTA, check_positive_int
from fedbandit.accounting.accountant import Accounting, account
from fedbandit.accounting.calibration import laplace_counter_scale
from fedbandit.accounting.events import DpEvent

__all__ = [
    "hybrid_counter_scales",
    "binary_counter_scale",
    "per_item_counter_scale",
    "account_pure",
]


def hybrid_counter_scales(epsilon, sensitivity: float = 1.0):
    """``(b_log, b_level)`` of the hybrid mechanism at privacy ``epsilon`` (scalar or array).

    ``b_log = 2s/ε`` is the scale of the logarithmic releases at the powers of two; the
    binary tree of interval ``k`` (items ``2^k + 1, ..., 2^{k+1} - 1``) uses ``k · b_level``
    with ``b_level = 2s/ε`` per node, since each of its items enters at most ``k`` nodes.
    Both halves are then ε/2-DP for every item, so the whole stream is ε-DP (Chan, Shi &
    Song 2011, Theorem 4.7).
    """
    b = laplace_counter_scale(epsilon, sensitivity, releases=2)
    return b, b


def binary_counter_scale(epsilon, n_steps: int, sensitivity: float = 1.0):
    """Node scale ``L s / ε`` of the binary mechanism over ``n_steps`` items, ``L = bit_length(n_steps)``."""
    n_steps = check_positive_int("n_steps", n_steps)
    return laplace_counter_scale(epsilon, sensitivity, releases=n_steps.bit_length())


def per_item_counter_scale(epsilon, sensitivity: float = 1.0):
    """Scale ``s / ε`` of a mechanism in which every item enters exactly one Laplace release."""
    return laplace_counter_scale(epsilon, sensitivity, releases=1)


def account_pure(event: DpEvent, *, target_epsilon: float, model: str = "", relation: str = "replace",
                 theorem: str = "", notes: str = "") -> Accounting:
    """:func:`fedbandit.accounting.account` of a pure ε-DP target: the accounting with target δ = 0.

    :func:`~fedbandit.accounting.account` takes a target δ in (0, 1); a pure-DP target is
    met iff the event's ε is at most ``target_epsilon`` with δ = 0, which holds for every
    positive target δ, so the smallest δ the accountant takes (1e-300) is passed and the result's target
    δ reported as 0 (an event with a positive δ then comes out "invalid").
    """
    acc = account(event, target_epsilon=target_epsilon, target_delta=MIN_DELTA, model=model, relation=relation,
                  theorem=theorem, notes=notes)
    return replace(acc, target_delta=0.0)
