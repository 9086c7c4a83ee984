r"""Shamir secret sharing over :math:`\mathbb F_p`, :math:`p = 2^{521} - 1`, with error detection.

A secret :math:`s` is the constant term of a random polynomial :math:`f` of degree
:math:`t - 1`; client :math:`x` holds :math:`f(x)`.  Any :math:`t` shares determine
:math:`s` (Lagrange interpolation at 0), fewer reveal nothing about it.

Drawing and evaluating the polynomial [derived]
-----------------------------------------------
:func:`shamir_share` draws :math:`f` in Newton form at the nodes :math:`0, 1, 2, \dots`,

.. math:: f(x) = \sum_{j=0}^{t-1} D_j \binom{x}{j}, \qquad D_0 = s,\quad
          D_1, \dots, D_{t-1} \sim \mathrm{U}(\mathbb F_p) \text{ independent},

where :math:`D_j = \Delta^j f(0)` is the :math:`j`-th forward difference at 0.  This is
the same law as uniform monomial coefficients :math:`a_1, \dots, a_{t-1}` (the textbook
draw): :math:`D = T a` with :math:`T_{jk} = j!\, S(k, j)` (Stirling numbers of the second
kind), upper triangular with diagonal :math:`j! \ne 0 \bmod p` (:math:`t < p`), and
:math:`T_{0k} = 0` for :math:`k \ge 1`, so :math:`(a_1, \dots, a_{t-1}) \mapsto (D_1,
\dots, D_{t-1})` is a bijection of :math:`\mathbb F_p^{t-1}` and maps the uniform law to
itself.  The Newton form makes evaluation at the points :math:`1, 2, \dots` cheap: the
difference table moves one step by :math:`D_j \leftarrow D_j + D_{j+1}`, the same
addition for every :math:`j`, which one big-integer shift and add does for all :math:`t`
lanes at once (lanes of :math:`L` bits, reduced mod :math:`p = 2^{521} - 1` by folding the
bits above 521 back every :math:`L - 523` steps).  :math:`n` shares cost :math:`n` such
steps of :math:`t L` bits instead of :math:`t n` separate multiply-adds.  Point sets that
are not dense in :math:`[1, \max x]` (client ids may go up to :math:`2^{32}`) are
evaluated term by term, :math:`\sum_j D_j \binom{x}{j}` with exact binomials; both give
the same shares.

Error detection [derived]
-------------------------
:func:`shamir_reconstruct` uses *every* share it is given, not only :math:`t` of them.
The :math:`m` shares :math:`(f(x_1), \dots, f(x_m))` form a codeword of the Reed–Solomon
code of length :math:`m` and dimension :math:`t`, whose minimum distance is
:math:`m - t + 1`.  The shares lie on one polynomial of degree at most :math:`t - 1` if and
only if the :math:`m - t` syndromes

.. math:: S_k = \sum_{i=1}^m w_i\, x_i^k\, y_i, \qquad
          w_i = \prod_{j \ne i} (x_i - x_j)^{-1}, \qquad k = 0, \dots, m - t - 1,

vanish (:math:`\sum_i w_i g(x_i)` is the leading coefficient of the interpolant of degree
:math:`m - 1` of :math:`g`, zero for every :math:`g` of degree :math:`\le m - 2`; the
:math:`m - t` conditions are independent, a Vandermonde system).  Rather than computing
all :math:`m - t` syndromes, the check computes one random combination
:math:`\sum_k r^k S_k` (one dot product of length :math:`m`), with :math:`r` drawn from
the CSPRNG once per set of share points and never revealed: if some :math:`S_k \ne 0` the
combination is a nonzero polynomial in :math:`r` of degree :math:`< m - t`, so it vanishes
with probability below :math:`(m - t)/p < 2^{-510}`.  Hence, except with that probability:

* **detected**: any :math:`e \le m - t` altered shares, whatever their values (another
  codeword differs in at least :math:`m - t + 1` positions); so with :math:`m` shares and
  threshold :math:`t` up to :math:`m - t` bad shares are always caught;
* **not detected**: anything when :math:`m = t` (every :math:`t`-tuple is consistent);
  :math:`e > m - t` shares altered by someone who knows the others and chooses the new
  values to land on another codeword.  (Shares altered blindly, e.g. by a transmission
  error, pass only with probability :math:`1/p`.)

The protocol of :mod:`fedbandit.secagg.protocol` therefore also *authenticates* every
share with a commitment of its dealer, which catches any altered share regardless of
:math:`m`; the syndrome check remains to catch a dealer whose shares are inconsistent.
"""

from __future__ import annotations

import operator
import secrets
from functools import lru_cache
from typing import Iterable, Mapping

import numpy as np

from fedbandit.secagg.errors import SecAggAbort, SecAggError, SecAggIntegrityError

__all__ = ["PRIME", "shamir_share", "shamir_reconstruct", "shamir_consistent"]

#: The Mersenne prime 2^521 - 1: Shamir shares live in F_p (secrets are 256-bit).
PRIME = (1 << 521) - 1


def _check_points(ids, name="ids") -> tuple[int, ...]:
    try:
        xs = list(ids)
    except TypeError:
        raise TypeError(f"{name} must be an iterable of distinct integers in [1, p) (share points), got {ids!r:.60}") from None
    for x in xs:
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 < int(x) < PRIME:
            raise SecAggError(f"{name} (share points) must be integers in [1, p), got {x!r:.60}")
    xs = [int(x) for x in xs]
    if len(set(xs)) != len(xs):
        raise SecAggError(f"{name} (share points) must be distinct, got {sorted(xs)}")
    return tuple(xs)


def shamir_share(secret: int, threshold: int, ids: Iterable[int]) -> dict[int, int]:
    r"""Split ``secret`` (in [0, p)) into ``threshold``-of-n Shamir shares at the points ``ids`` (>= 1).

    The polynomial is drawn in Newton form, its differences :math:`D_1, \dots, D_{t-1}`
    uniform from the operating system's CSPRNG (:mod:`secrets`): the same law as uniform
    monomial coefficients (module notes).
    """
    xs = _check_points(ids)
    if isinstance(secret, bool) or not isinstance(secret, int) or not 0 <= secret < PRIME:
        raise SecAggError(f"secret must be an integer in the field range [0, p), p = 2^521 - 1, got {secret!r:.60}")
    if isinstance(threshold, bool) or not isinstance(threshold, int) or not 1 <= threshold <= len(xs):
        raise SecAggError(f"threshold must lie in [1, {len(xs)}] (the number of share points), got {threshold!r}")
    diffs = [secret] + [secrets.randbelow(PRIME) for _ in range(threshold - 1)]
    return _newton_shares(diffs, xs)


_FOLD_STEPS = 32  # difference steps between two reductions mod p
_LANE_BITS = 521 + _FOLD_STEPS + 2  # a folded lane is < 2^522 and at most doubles per step


@lru_cache(maxsize=16)
def _lane_masks(n_lanes: int) -> tuple[int, int]:
    """(p in every lane, 2^(L - 521) - 1 in every lane): the low and high parts that folding adds."""
    low = high = 0
    for _ in range(n_lanes):
        low = (low << _LANE_BITS) | PRIME
        high = (high << _LANE_BITS) | ((1 << (_LANE_BITS - 521)) - 1)
    return low, high


def _newton_shares(diffs: list[int], xs: tuple[int, ...]) -> dict[int, int]:
    """f(x) mod p for f(x) = sum_j diffs[j] * C(x, j) (diffs in [0, p)), at every point of ``xs``."""
    top = max(xs)
    if top > 4 * len(xs) + 64:  # sparse points: term by term, exact binomials
        shares = {}
        for x in xs:
            acc, binom = diffs[0], 1
            for j in range(1, min(len(diffs), x + 1)):
                binom = binom * (x - j + 1) // j
                acc += diffs[j] * binom
            shares[x] = acc % PRIME
        return shares
    # dense points: the difference table, all t lanes of one big integer stepped at once;
    # after the step to x, lane j holds (Delta^j f)(x) mod p (up to multiples of p)
    width = _LANE_BITS
    table = 0
    for d in reversed(diffs):
        table = (table << width) | d
    low, high = _lane_masks(len(diffs))
    lane0 = (1 << width) - 1
    wanted = set(xs)
    shares = {}
    for x in range(1, top + 1):
        table += table >> width  # D_j <- D_j + D_{j+1} in every lane; no carry leaves a lane
        if x % _FOLD_STEPS == 0:
            table = (table & low) + ((table >> 521) & high)  # 2^521 = 1 mod p, lane by lane
        if x in wanted:
            shares[x] = (table & lane0) % PRIME
    return {x: shares[x] for x in xs}


@lru_cache(maxsize=64)
def lagrange_at_zero(xs: tuple[int, ...]) -> tuple[int, ...]:
    coeffs = []
    for i, xi in enumerate(xs):
        num, den = 1, 1
        for j, xj in enumerate(xs):
            if i != j:
                num = num * (-xj) % PRIME
                den = den * (xi - xj) % PRIME
        coeffs.append(num * pow(den, -1, PRIME) % PRIME)
    return tuple(coeffs)


@lru_cache(maxsize=64)
def _check_vector(xs: tuple[int, ...], n_checks: int) -> tuple[int, ...]:
    """c_i = w_i g(x_i), g(x) = sum_{k < n_checks} (r x)^k, for a secret random r drawn once per point set."""
    r = 1 + secrets.randbelow(PRIME - 1)
    out = []
    for i, xi in enumerate(xs):
        den = 1
        for j, xj in enumerate(xs):
            if i != j:
                den = den * (xi - xj) % PRIME
        z = r * xi % PRIME
        g = 0
        for _ in range(n_checks):
            g = (g * z + 1) % PRIME
        out.append(pow(den, -1, PRIME) * g % PRIME)
    return tuple(out)


def _check_shares(shares: Mapping[int, int], threshold: int) -> tuple[tuple[int, ...], list[int]]:
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise SecAggError(f"threshold must be a positive integer, got {threshold!r}")
    if not isinstance(shares, Mapping):
        raise TypeError(f"shares must be a mapping {{share point: share}}, got {type(shares).__name__}")
    xs = _check_points(sorted(shares, key=int), "shares")
    shares = {int(x): y for x, y in shares.items()}
    ys = []
    for x in xs:
        y = shares[x]
        if isinstance(y, bool) or not isinstance(y, int) or not 0 <= y < PRIME:
            raise SecAggError(f"shares: the share at point {x} is not a field element in [0, p)")
        ys.append(y)
    if len(xs) < threshold:
        raise SecAggAbort(f"need {threshold} shares to reconstruct, got {len(xs)}")
    return xs, ys


def _consistent(xs: tuple[int, ...], ys: list[int], threshold: int) -> bool:
    n_checks = len(xs) - threshold
    if n_checks <= 0:
        return True
    return sum(map(operator.mul, _check_vector(xs, n_checks), ys)) % PRIME == 0


def shamir_consistent(shares: Mapping[int, int], threshold: int) -> bool:
    """Whether all ``shares`` lie on one polynomial of degree at most ``threshold - 1`` (see the module notes)."""
    xs, ys = _check_shares(shares, threshold)
    return _consistent(xs, ys, threshold)


def shamir_reconstruct(shares: Mapping[int, int], threshold: int) -> int:
    """Recover the secret from at least ``threshold`` shares, checking that *all* of them agree.

    Raises
    ------
    SecAggAbort
        Fewer than ``threshold`` shares.
    SecAggIntegrityError
        The shares do not lie on one polynomial of degree ``threshold - 1``: at least one
        is wrong (detected whenever at most ``len(shares) - threshold`` are wrong).
    """
    xs, ys = _check_shares(shares, threshold)
    if not _consistent(xs, ys, threshold):
        raise SecAggIntegrityError(
            f"the {len(xs)} shares do not lie on one polynomial of degree {threshold - 1}: at least one share is wrong"
        )
    base = xs[:threshold]
    lam = lagrange_at_zero(base)
    return sum(map(operator.mul, lam, ys[:threshold])) % PRIME
